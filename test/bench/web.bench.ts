/**
 * The web interface's figures (`npm run bench:web`): the first load's gzipped size; how long a
 * 10,000-entry folder takes to show its first rows and to finish loading in chromium; upload
 * throughput from the page against curl through the same multi-step upload, in the same run; and
 * a folder zip's throughput with the gateway's peak RSS while it streams (it must not grow with
 * the archive). SVC_BENCH_FILE_MB sets the file size (default 256).
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { launchChromium } from '../helpers/chromium.ts';
import {
  API,
  MiB,
  RssSampler,
  api,
  best,
  f0,
  f1,
  f2,
  mbps,
  must,
  seconds,
  startGateway,
  stopChild,
  timed,
} from './lib.ts';

const FILE_MB = Number(process.env.SVC_BENCH_FILE_MB ?? 256);
const manifest = JSON.parse(readFileSync('dist/web/manifest.json', 'utf8')) as {
  first_load_gzip_bytes: number;
};
console.log(
  `first load (page, script, style sheet): ${f1(manifest.first_load_gzip_bytes / 1024)} KiB gzipped`,
);

const { child, info: gw } = await startGateway(['--populate', '10000']);
const work = mkdtempSync(path.join(os.tmpdir(), 'svc-web-bench-'));
const base = `https://127.0.0.1:${gw.port}`;
const browser = await launchChromium();
try {
  await api(gw, 'POST', '/users', {
    username: 'web',
    password: 'web-password-1',
    site_admin: true,
    user_root: 'big/',
  });
  const page = await (await browser.newContext({ ignoreHTTPSErrors: true })).newPage();
  await page.goto(`${base}/`);
  await page.getByLabel('Username').fill('web');
  await page.getByLabel('Password').fill('web-password-1');
  const t0 = performance.now();
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('row').filter({ hasText: 'f0000000.bin' }).waitFor();
  const firstRows = seconds(t0);
  await page.getByText('10000 items', { exact: true }).waitFor({ timeout: 120_000 });
  const all = seconds(t0);
  console.log(
    `10,000-entry folder: first rows ${f0(firstRows * 1000)} ms after Sign in, all loaded ${f0(all * 1000)} ms; ` +
      `${await page.locator('.rows [role=row]').count()} rows in the DOM`,
  );

  // Upload: the page (32 MiB parts through XMLHttpRequest, two at a time) against curl (one PUT)
  // to the same API.
  const file = path.join(work, 'upload.bin');
  const data = Buffer.alloc(FILE_MB * MiB);
  for (let i = 0; i < data.length; i += 4096) data.writeUInt32LE(i, i);
  writeFileSync(file, data);
  const md5 = createHash('md5').update(data).digest('hex');
  await page.getByRole('button', { name: 'Home' }).click();
  // Best of two for each client, alternating: the machine is shared and noisy.
  const pageS = await best(2, async () => {
    const tPage = performance.now();
    await page.locator('input[type=file][multiple]').setInputFiles(file);
    // The page clears the last round's line when an upload starts.
    await page.getByText('Upload finished.').waitFor({ state: 'hidden' });
    await page.getByText('Upload finished.').waitFor({ timeout: 600_000 });
    return seconds(tPage);
  });
  const stat = await api<{ md5: string }>(gw, 'GET', '/files/big/upload.bin?action=stat');
  if (stat.md5 !== md5) throw new Error('the page uploaded other bytes');

  const ca = `${gw.dataDir}/tls/cert.pem`;
  const curlS = await best(2, () =>
    timed([
      'bash',
      '-c',
      `set -e
     U=$(curl -sf --cacert ${ca} -H 'X-SvcAPI-Key: ${gw.key}' -d action=put ${base}${API}/files/big/curl.bin)
     URI=$(echo "$U" | sed -E 's/.*"upload_uri":"([^"]+)".*/\\1/')
     REF=$(echo "$U" | sed -E 's/.*"ref":"([^"]+)".*/\\1/')
     curl -sf --cacert ${ca} -T ${file} "$URI" -o /dev/null
     curl -sf --cacert ${ca} -H 'X-SvcAPI-Key: ${gw.key}' -d action=end -d ref=$REF ${base}${API}/files/big/curl.bin -o /dev/null`,
    ]),
  );
  const pageRate = mbps(data.length, pageS);
  const curlRate = mbps(data.length, curlS);
  console.log(
    `upload ${FILE_MB} MiB: page ${f0(pageRate)} MB/s, curl ${f0(curlRate)} MB/s, ratio ${f2(pageRate / curlRate)}`,
  );

  // Zip: a folder of two copies, streamed to curl; the gateway's RSS sampled all along.
  await api(gw, 'POST', '/folders/zipme');
  await api(gw, 'POST', '/files/big/upload.bin', { 'copy-destination': 'zipme/a.bin' });
  await api(gw, 'POST', '/files/big/curl.bin', { 'copy-destination': 'zipme/b.bin' });
  const rss = new RssSampler(gw.pid);
  const idle = rss.idle;
  rss.start();
  const zipS = await timed([
    'curl',
    '-sf',
    '--cacert',
    ca,
    '-H',
    `X-SvcAPI-Key: ${gw.key}`,
    '-o',
    path.join(work, 'z.zip'),
    `${base}${API}/zip/zipme`,
  ]);
  rss.pause();
  await must(['unzip', '-tq', path.join(work, 'z.zip')]);
  console.log(
    `zip of ${2 * FILE_MB} MiB: ${f0(mbps(2 * data.length, zipS))} MB/s; gateway RSS ${f0(idle)} MiB before, ` +
      `peak ${f0(rss.max)} MiB while streaming`,
  );
} finally {
  await browser.close();
  await stopChild(child);
  rmSync(work, { recursive: true, force: true });
}
