/**
 * WebDAV benchmark: the gateway's WebDAV front end against nginx's dav module (with dav-ext for
 * PROPFIND), both over HTTPS on loopback with the gateway's generated certificate, side by side in
 * one run: a 1 GiB PUT and GET with curl, 1,000 files of 4 KiB with `rclone copy` and with one curl
 * --parallel (PUT, then GET), PROPFIND Depth 1 of a 10,000-entry folder and of an empty one (connect
 * + login + listing), and the gateway's RSS during the big transfers. The gateway runs as an
 * operator runs it: `svc-gateway serve` from the compiled dist/ (`npm run bench:webdav` compiles
 * first), at SVC_DURABILITY (fsync by default, or os), on SQLite with the local blob store, /big's
 * 10,000 rows written into the SQLite file; it is reached with an API key of the site admin as the
 * Basic username.
 *
 *   npm run bench:webdav
 *   SVC_DURABILITY=os npm run bench:webdav           (the gateway leaves uploads to the page cache)
 *   SVC_BENCH_FILE_MB=256 npm run bench:webdav      (a smaller big file, for a quick look)
 *   SVC_BENCH_QUICK=1 npm run bench:webdav           (a smoke run: 64 MiB, 100 small files, 1 repetition)
 *
 * The machine is shared and noisy: every transfer runs RUNS times on each server, alternating which
 * server goes first, and the best time is kept. MB/s are 10^6 bytes per second; RSS is VmRSS in
 * MiB. The table is printed and written to test/bench/results-webdav.md (results-webdav-os.md at
 * os), its figures to results-webdav[-os].json for the summary of `npm run bench`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  fsyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  api,
  benchTitle,
  cleanups,
  davTools,
  DURABILITY,
  durabilityNote,
  type Figure,
  FILE_BYTES,
  MB,
  MiB,
  noFsync,
  populateSqlite,
  RUNS,
  runCleanups,
  serveCompiled,
  SMALL_FILES,
  startNginx,
  stopChild,
  table,
  writeResults,
  apiKey,
} from './lib.ts';

const PASSWORD = 'Bench-password-1';
const SMALL_BYTES = 4096;
const SMALL_CONCURRENCY = 4;
const LIST_ENTRIES = 10_000;
const PROPFIND_RUNS = 3;
const RSS_LIMIT_MIB = 150;

// ---------------------------------------------------------------------------------------------
// Processes

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  s: number;
}

/** run runs a program to its end and collects its output and wall time. */
function run(command: string, args: string[], timeoutMs = 300_000): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, s: seconds(t0) });
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Measurements

/** RssSampler reads VmRSS of a process every 100 ms and keeps the maximum. */
class RssSampler {
  max = 0;
  private readonly timer: NodeJS.Timeout;
  constructor(private readonly pid: number) {
    this.sample();
    this.timer = setInterval(() => this.sample(), 100);
  }
  private sample(): void {
    this.max = Math.max(this.max, rssNow(this.pid));
  }
  stop(): number {
    clearInterval(this.timer);
    this.sample();
    return this.max;
  }
}

function rssNow(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

const seconds = (t0: number) => (performance.now() - t0) / 1000;

/** generate writes `bytes` random bytes to `file` (fsynced) and returns their md5. */
function generate(file: string, bytes: number): string {
  const fd = openSync(file, 'w');
  const md5 = createHash('md5');
  const buf = Buffer.alloc(MiB);
  try {
    for (let left = bytes; left > 0; left -= buf.length) {
      const chunk = left >= buf.length ? buf : buf.subarray(0, left);
      randomFillSync(chunk);
      md5.update(chunk);
      writeSync(fd, chunk);
    }
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return md5.digest('hex');
}

/** Server is one side of the comparison: a base URL, curl's credentials and rclone's flags. */
interface Server {
  name: string;
  base: string;
  curlAuth: string[];
  rcloneAuth: string[];
}

interface CurlResult {
  status: number;
  s: number;
  down: number;
  up: number;
  headers: string;
}

/** curl runs one request and reads status, time_total and byte counts from its -w line. */
async function curl(server: Server, args: string[], ca: string, headersTo?: string): Promise<CurlResult> {
  const r = await run('curl', [
    '-sS',
    '--http1.1',
    '--cacert',
    ca,
    ...server.curlAuth,
    ...(headersTo ? ['-D', headersTo] : []),
    '-w',
    '%{http_code} %{time_total} %{size_download} %{size_upload}',
    ...args,
  ]);
  if (r.code !== 0) throw new Error(`curl ${args.join(' ')} (${server.name}): exit ${r.code} ${r.stderr}`);
  const [status, s, down, up] = r.stdout.trim().split(/\s+/).slice(-4).map(Number) as [
    number,
    number,
    number,
    number,
  ];
  return { status, s, down, up, headers: headersTo ? readFileSync(headersTo, 'utf8') : '' };
}

// ---------------------------------------------------------------------------------------------
// The run

interface Row {
  metric: string;
  value: string;
  peer: string;
  ratio: string;
}
const rows: Row[] = [];
const figures: Figure[] = [];
const mbps = (bytes: number, s: number) => bytes / MB / s;
const f0 = (x: number) => x.toFixed(0);
const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);
const sizeLabel =
  FILE_BYTES % (1024 * MiB) === 0 ? `${FILE_BYTES / (1024 * MiB)} GiB` : `${FILE_BYTES / MiB} MiB`;
const countResponses = (xml: string) => (xml.match(/<([A-Za-z0-9]+:)?response[\s>]/g) ?? []).length;

const started = performance.now();

try {
  const tools = davTools();
  const work = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-webdav-'));
  cleanups.push(() => rmSync(work, { recursive: true, force: true }));
  // nginx's worker runs as nobody: it must reach and write the DAV root.
  chmodSync(work, 0o755);
  const src = path.join(work, 'src');
  mkdirSync(src);
  const bigFile = path.join(src, 'big.bin');
  let t = performance.now();
  const md5 = generate(bigFile, FILE_BYTES);
  console.log(`generated ${sizeLabel} of random bytes in ${f1(seconds(t))} s (md5 ${md5}) in ${work}`);
  const small = path.join(work, 'small');
  mkdirSync(small);
  const smallBuf = Buffer.alloc(SMALL_BYTES);
  for (let i = 0; i < SMALL_FILES; i++) {
    randomFillSync(smallBuf);
    writeFileSync(path.join(small, `s${String(i).padStart(4, '0')}.bin`), smallBuf);
  }

  // The compiled gateway, with /big holding LIST_ENTRIES rows written into its SQLite file, an
  // empty folder, and an API key of the site admin for Basic authentication.
  t = performance.now();
  const dataDir = path.join(work, 'data');
  const gw = await serveCompiled(dataDir, PASSWORD, {
    SVC_FTP_PORT: 'off',
    SVC_FTPS_PORT: 'off',
    SVC_SFTP_PORT: 'off',
  });
  const davPort = gw.ports.webdav;
  if (!davPort) throw new Error(`the gateway bound no webdav port: ${JSON.stringify(gw.ports)}`);
  const pid = gw.pid;
  const key = await apiKey(gw.rest, PASSWORD, 'webdav bench');
  await api(gw.rest, 'POST', '/folders/big', {});
  await api(gw.rest, 'POST', '/folders/empty', {});
  populateSqlite(dataDir, LIST_ENTRIES);
  console.log(
    `gateway pid ${pid} (compiled, durability ${DURABILITY}), WebDAV on :${davPort}, data dir ${dataDir}; ` +
      `${LIST_ENTRIES} rows populated (up in ${f1(seconds(t))} s)`,
  );
  const tlsDir = path.join(dataDir, 'tls');
  const ca = path.join(tlsDir, 'cert.pem');

  // nginx, its DAV root holding a /big of LIST_ENTRIES sparse files of the same names and sizes.
  const davRoot = path.join(work, 'dav');
  mkdirSync(path.join(davRoot, 'big'), { recursive: true });
  mkdirSync(path.join(davRoot, 'empty'));
  for (let j = 0; j < LIST_ENTRIES; j++) {
    const name = path.join(davRoot, 'big', `f${String(j).padStart(7, '0')}.bin`);
    writeFileSync(name, '');
    truncateSync(name, (j * 7919) % 1_000_003);
  }
  chmodSync(davRoot, 0o777);
  const nginxDir = path.join(work, 'nginx');
  mkdirSync(nginxDir);
  const ngx = await startNginx(tools.nginx, nginxDir, davRoot, tlsDir, tools.davExt);
  cleanups.push(() => stopChild(ngx.child));
  console.log(`nginx ${tools.nginx} on :${ngx.port}${tools.davExt ? ' with dav-ext' : ' WITHOUT dav-ext'}`);

  const rclonePass = spawnSync('rclone', ['obscure', 'unused'], { encoding: 'utf8' }).stdout?.trim() ?? '';
  const gateway: Server = {
    name: 'gateway',
    base: `https://127.0.0.1:${davPort}`,
    curlAuth: ['-u', `${key}:`],
    rcloneAuth: ['--webdav-user', key, '--webdav-pass', rclonePass],
  };
  const nginx: Server = {
    name: 'nginx',
    base: `https://127.0.0.1:${ngx.port}`,
    curlAuth: [],
    rcloneAuth: [],
  };
  const both = (i: number) => (i % 2 === 0 ? [gateway, nginx] : [nginx, gateway]);
  const idle = rssNow(pid);

  // 1 GiB PUT: RUNS per server, alternating who goes first, each to a new name; best kept.
  const put = { gateway: Infinity, nginx: Infinity, nginxSync: Infinity };
  let putRss = 0;
  for (let i = 0; i < RUNS; i++) {
    for (const s of both(i)) {
      const name = `big-${i}.bin`;
      const rss = s === gateway ? new RssSampler(pid) : null;
      const r = await curl(s, ['-T', bigFile, '-o', '/dev/null', `${s.base}/${name}`], ca);
      if (rss) putRss = Math.max(putRss, rss.stop());
      if (r.status !== 201 && r.status !== 204) throw new Error(`PUT ${name} (${s.name}): ${r.status}`);
      if (r.up !== FILE_BYTES) throw new Error(`PUT ${name} (${s.name}) sent ${r.up} bytes`);
      let line = `PUT ${s.name} run ${i + 1}: ${f1(mbps(FILE_BYTES, r.s))} MB/s (${f1(r.s)} s)`;
      if (s === gateway) {
        put.gateway = Math.min(put.gateway, r.s);
        line += `, max RSS ${f0(putRss)} MiB`;
      } else {
        // The gateway fsyncs the blob before it answers; nginx does not. Also timed: nginx + fsync.
        const stored = path.join(davRoot, name);
        if (statSync(stored).size !== FILE_BYTES)
          throw new Error(`nginx stored ${statSync(stored).size} bytes`);
        const sync = await run('sync', [stored]);
        put.nginx = Math.min(put.nginx, r.s);
        put.nginxSync = Math.min(put.nginxSync, r.s + sync.s);
        line += `; then fsync ${f1(sync.s)} s`;
      }
      console.log(line);
    }
  }
  // The gateway's ETag carries the md5 it computed while streaming.
  const head = await curl(
    gateway,
    ['-I', '-o', '/dev/null', `${gateway.base}/big-0.bin`],
    ca,
    path.join(work, 'h'),
  );
  const etag = /^etag:\s*"([0-9a-f]+)-/im.exec(head.headers)?.[1];
  if (etag !== md5) throw new Error(`the gateway's file has md5 ${etag}, want ${md5}`);

  // 1 GiB GET of the first file, into /dev/null.
  const get = { gateway: Infinity, nginx: Infinity };
  let getRss = 0;
  for (let i = 0; i < RUNS; i++) {
    for (const s of both(i)) {
      const rss = s === gateway ? new RssSampler(pid) : null;
      const r = await curl(s, ['-o', '/dev/null', `${s.base}/big-0.bin`], ca);
      if (rss) getRss = Math.max(getRss, rss.stop());
      if (r.status !== 200 || r.down !== FILE_BYTES)
        throw new Error(`GET (${s.name}): ${r.status}, ${r.down} bytes`);
      get[s.name as 'gateway' | 'nginx'] = Math.min(get[s.name as 'gateway' | 'nginx'], r.s);
      console.log(
        `GET ${s.name} run ${i + 1}: ${f1(mbps(FILE_BYTES, r.s))} MB/s (${f1(r.s)} s)` +
          (rss ? `, max RSS ${f0(getRss)} MiB` : ''),
      );
    }
  }

  const putG = mbps(FILE_BYTES, put.gateway);
  const putN = mbps(FILE_BYTES, put.nginx);
  const putNS = mbps(FILE_BYTES, put.nginxSync);
  const getG = mbps(FILE_BYTES, get.gateway);
  const getN = mbps(FILE_BYTES, get.nginx);
  rows.push({
    metric:
      `PUT ${sizeLabel} with curl -T (gateway ${DURABILITY === 'fsync' ? 'fsyncs before 201' : 'durability os: no fsync'}; ` +
      `md5 checked), best of ${RUNS}, MB/s`,
    value: f0(putG),
    peer: `${noFsync('nginx dav')}: ${f0(putN)}`,
    ratio: f2(putG / putN),
  });
  rows.push({
    metric: `… same, peer timed as nginx PUT + fsync of the stored file (like for like), MB/s`,
    value: f0(putG),
    peer: `nginx dav + fsync: ${f0(putNS)}`,
    ratio: f2(putG / putNS),
  });
  rows.push({
    metric: `GET ${sizeLabel} with curl into /dev/null, best of ${RUNS}, MB/s`,
    value: f0(getG),
    peer: `nginx: ${f0(getN)}`,
    ratio: f2(getG / getN),
  });
  figures.push(
    {
      key: 'put',
      gateway: putG,
      peer: putN,
      peerName: 'nginx',
      unit: 'MB/s',
      peerFsyncs: false,
      peerWithFsync: putNS,
    },
    { key: 'get', gateway: getG, peer: getN, peerName: 'nginx', unit: 'MB/s' },
    {
      key: 'rss.transfer',
      gateway: Math.max(putRss, getRss),
      peer: null,
      peerName: '',
      unit: 'MiB',
    },
  );
  rows.push({
    metric: `gateway max RSS during the ${sizeLabel} PUTs, MiB (idle before: ${f0(idle)}, so +${f0(putRss - idle)})`,
    value: f0(putRss),
    peer: `limit ${RSS_LIMIT_MIB}`,
    ratio: f2(putRss / RSS_LIMIT_MIB),
  });
  rows.push({
    metric: `gateway max RSS during the ${sizeLabel} GETs, MiB (+${f0(getRss - idle)} over idle)`,
    value: f0(getRss),
    peer: `limit ${RSS_LIMIT_MIB}`,
    ratio: f2(getRss / RSS_LIMIT_MIB),
  });
  // The big files are not needed any more: free the disk and page cache they hold.
  for (let i = 0; i < RUNS; i++) {
    await curl(gateway, ['-X', 'DELETE', '-o', '/dev/null', `${gateway.base}/big-${i}.bin`], ca);
    rmSync(path.join(davRoot, `big-${i}.bin`), { force: true });
  }

  // 1,000 × 4 KiB with rclone copy, each run into a new folder; best kept.
  if (tools.rclone) {
    const rate = { gateway: 0, nginx: 0 };
    for (let i = 0; i < RUNS; i++) {
      for (const s of both(i)) {
        if (s === nginx && !tools.davExt) continue;
        const dest = `small-${i}`;
        const r = await run('rclone', [
          'copy',
          small,
          `:webdav:${dest}`,
          '--webdav-url',
          `${s.base}/`,
          '--webdav-vendor',
          'other',
          ...s.rcloneAuth,
          '--ca-cert',
          ca,
          '--config',
          '/dev/null',
          '-q',
        ]);
        if (r.code !== 0) throw new Error(`rclone copy (${s.name}): exit ${r.code} ${r.stderr.slice(-500)}`);
        const listing = await curl(
          s,
          ['-X', 'PROPFIND', '-H', 'Depth: 1', '-o', path.join(work, 'list.xml'), `${s.base}/${dest}/`],
          ca,
        );
        const n = countResponses(readFileSync(path.join(work, 'list.xml'), 'utf8')) - 1;
        if (listing.status !== 207 || n !== SMALL_FILES)
          throw new Error(`rclone copy (${s.name}) left ${n} files (PROPFIND ${listing.status})`);
        const fps = SMALL_FILES / r.s;
        rate[s.name as 'gateway' | 'nginx'] = Math.max(rate[s.name as 'gateway' | 'nginx'], fps);
        console.log(`rclone copy ${s.name} run ${i + 1}: ${f0(fps)} files/s (${f1(r.s)} s)`);
      }
    }
    rows.push({
      metric: `rclone copy of ${SMALL_FILES} × 4 KiB files (default 4 transfers, vendor other, new folder; client-bound: pacer ≤ 100 requests/s, 3 per file), best of ${RUNS}, files/s`,
      value: f0(rate.gateway),
      peer: tools.davExt ? `nginx dav: ${f0(rate.nginx)}` : 'nginx: skipped (no dav-ext for PROPFIND)',
      ratio: tools.davExt ? f2(rate.gateway / rate.nginx) : '—',
    });
  } else {
    rows.push({ metric: 'rclone copy: skipped (rclone missing)', value: '—', peer: '—', ratio: '—' });
  }

  // The same 1,000 files with one curl --parallel (4 connections, keep-alive): rclone 1.60's webdav
  // pacer starts at most one request per 10 ms (MKCOL + PUT + PROPFIND per file, so ~30 files/s on
  // any server); this row is bound by the servers instead.
  const names = readdirSync(small).sort();
  /** parallel runs one curl --parallel over `entries` (config lines per file); `want` statuses counted. */
  const parallelCurl = async (s: Server, label: string, entries: string[], want: string): Promise<number> => {
    const cfg = path.join(work, `curl-${s.name}-${label}.cfg`);
    writeFileSync(cfg, entries.join(''));
    const r = await run('curl', [
      '-sS',
      '--http1.1',
      '--cacert',
      ca,
      ...s.curlAuth,
      '--parallel',
      '--parallel-immediate',
      '--parallel-max',
      String(SMALL_CONCURRENCY),
      '-w',
      '%{http_code}\n',
      '-K',
      cfg,
    ]);
    const ok = r.stdout.split('\n').filter((c) => c === want).length;
    if (r.code !== 0 || ok !== SMALL_FILES)
      throw new Error(
        `curl --parallel ${label} (${s.name}): exit ${r.code}, ${ok} answered ${want}; ${r.stderr.slice(-300)}`,
      );
    return SMALL_FILES / r.s;
  };
  const parallel = { gateway: 0, nginx: 0 };
  const parallelGet = { gateway: 0, nginx: 0 };
  for (let i = 0; i < RUNS; i++) {
    for (const s of both(i)) {
      const dest = `curl-${i}`;
      const mk = await curl(s, ['-X', 'MKCOL', '-o', '/dev/null', `${s.base}/${dest}/`], ca);
      if (mk.status !== 201) throw new Error(`MKCOL ${dest} (${s.name}): ${mk.status}`);
      const k = s.name as 'gateway' | 'nginx';
      const fps = await parallelCurl(
        s,
        `put-${i}`,
        names.map(
          (n) =>
            `url = "${s.base}/${dest}/${n}"\nupload-file = "${path.join(small, n)}"\noutput = "/dev/null"\n`,
        ),
        '201',
      );
      parallel[k] = Math.max(parallel[k], fps);
      console.log(`curl --parallel PUT ${s.name} run ${i + 1}: ${f0(fps)} files/s`);
    }
    // The files just stored, read back the same way.
    for (const s of both(i)) {
      const k = s.name as 'gateway' | 'nginx';
      const fps = await parallelCurl(
        s,
        `get-${i}`,
        names.map((n) => `url = "${s.base}/curl-${i}/${n}"\noutput = "/dev/null"\n`),
        '200',
      );
      parallelGet[k] = Math.max(parallelGet[k], fps);
      console.log(`curl --parallel GET ${s.name} run ${i + 1}: ${f0(fps)} files/s`);
    }
  }
  rows.push({
    metric: `PUT of the same ${SMALL_FILES} × 4 KiB files with one curl --parallel (${SMALL_CONCURRENCY} connections, keep-alive), best of ${RUNS}, files/s`,
    value: f0(parallel.gateway),
    peer: `${noFsync('nginx dav')}: ${f0(parallel.nginx)}`,
    ratio: f2(parallel.gateway / parallel.nginx),
  });
  rows.push({
    metric: `GET of those ${SMALL_FILES} files with one curl --parallel (${SMALL_CONCURRENCY} connections, keep-alive), best of ${RUNS}, files/s`,
    value: f0(parallelGet.gateway),
    peer: `nginx: ${f0(parallelGet.nginx)}`,
    ratio: f2(parallelGet.gateway / parallelGet.nginx),
  });
  figures.push(
    {
      key: 'small.put',
      gateway: parallel.gateway,
      peer: parallel.nginx,
      peerName: 'nginx',
      unit: 'files/s',
      peerFsyncs: false,
    },
    {
      key: 'small.get',
      gateway: parallelGet.gateway,
      peer: parallelGet.nginx,
      peerName: 'nginx',
      unit: 'files/s',
    },
  );

  // PROPFIND Depth 1 of /big: allprop (empty body, as Explorer asks) and the four props rclone asks for.
  const propBody = path.join(work, 'prop.xml');
  writeFileSync(
    propBody,
    '<?xml version="1.0"?><d:propfind xmlns:d="DAV:"><d:prop><d:displayname/><d:getlastmodified/>' +
      '<d:getcontentlength/><d:resourcetype/></d:prop></d:propfind>',
  );
  const kinds: [string, string[]][] = [
    ['allprop (no body)', []],
    ['prop: displayname, getlastmodified, getcontentlength, resourcetype', ['--data-binary', `@${propBody}`]],
  ];
  for (const [label, body] of kinds) {
    const best = { gateway: Infinity, nginx: Infinity };
    const bytes = { gateway: 0, nginx: 0 };
    for (let i = 0; i < PROPFIND_RUNS; i++) {
      for (const s of both(i)) {
        if (s === nginx && !tools.davExt) continue;
        const out = path.join(work, `propfind-${s.name}.xml`);
        const r = await curl(
          s,
          [
            '-X',
            'PROPFIND',
            '-H',
            'Depth: 1',
            '-H',
            'Content-Type: application/xml',
            ...body,
            '-o',
            out,
            `${s.base}/big/`,
          ],
          ca,
        );
        const n = countResponses(readFileSync(out, 'utf8'));
        if (r.status !== 207 || n !== LIST_ENTRIES + 1)
          throw new Error(`PROPFIND ${label} (${s.name}): ${r.status} with ${n} responses`);
        const k = s.name as 'gateway' | 'nginx';
        best[k] = Math.min(best[k], r.s);
        bytes[k] = r.down;
      }
    }
    console.log(
      `PROPFIND ${label}: gateway ${f0(best.gateway * 1000)} ms ${bytes.gateway} B; ` +
        `nginx ${f0(best.nginx * 1000)} ms ${bytes.nginx} B`,
    );
    rows.push({
      metric: `PROPFIND Depth 1 of a ${LIST_ENTRIES}-entry folder, ${label}, best of ${PROPFIND_RUNS}, ms (ratio: gateway/nginx time)`,
      value: f0(best.gateway * 1000),
      peer: tools.davExt ? `nginx dav-ext: ${f0(best.nginx * 1000)}` : 'nginx: skipped (no dav-ext)',
      ratio: tools.davExt ? f2(best.gateway / best.nginx) : '—',
    });
    rows.push({
      metric: `… response bytes (${f0(bytes.gateway / (LIST_ENTRIES + 1))} B per entry)`,
      value: String(bytes.gateway),
      peer: tools.davExt ? `nginx dav-ext: ${bytes.nginx}` : '—',
      ratio: tools.davExt ? f2(bytes.gateway / bytes.nginx) : '—',
    });
    figures.push({
      key: body.length === 0 ? 'list.allprop' : 'list.props',
      gateway: best.gateway * 1000,
      peer: tools.davExt ? best.nginx * 1000 : null,
      peerName: 'nginx dav-ext',
      unit: 'ms',
    });
  }

  // Connect + login + PROPFIND Depth 1 of an empty folder: a new curl (TCP, TLS, Basic) each time.
  const empty = { gateway: Infinity, nginx: Infinity };
  for (let i = 0; i < PROPFIND_RUNS; i++) {
    for (const s of both(i)) {
      if (s === nginx && !tools.davExt) continue;
      const out = path.join(work, `empty-${s.name}.xml`);
      const r = await curl(s, ['-X', 'PROPFIND', '-H', 'Depth: 1', '-o', out, `${s.base}/empty/`], ca);
      const n = countResponses(readFileSync(out, 'utf8'));
      if (r.status !== 207 || n !== 1)
        throw new Error(`PROPFIND /empty/ (${s.name}): ${r.status} with ${n} responses`);
      const k = s.name as 'gateway' | 'nginx';
      empty[k] = Math.min(empty[k], r.s);
    }
  }
  rows.push({
    metric: `connect + login + PROPFIND Depth 1 of an empty folder, a new curl each time, best of ${PROPFIND_RUNS}, ms`,
    value: f0(empty.gateway * 1000),
    peer: tools.davExt
      ? `nginx dav-ext (no login): ${f0(empty.nginx * 1000)}`
      : 'nginx: skipped (no dav-ext)',
    ratio: tools.davExt ? f2(empty.gateway / empty.nginx) : '—',
  });
  figures.push({
    key: 'login.empty',
    gateway: empty.gateway * 1000,
    peer: tools.davExt ? empty.nginx * 1000 : null,
    peerName: 'nginx dav-ext',
    unit: 'ms',
  });
  console.log(`nginx DAV root left ${readdirSync(davRoot).length} entries; stopping`);
} finally {
  await runCleanups();
}

const text = table(
  benchTitle('WebDAV'),
  [
    `Gateway (\`svc-gateway serve\` from the compiled dist/, storage.durability ${DURABILITY}, SQLite, local ` +
      `blob store, an API key of the site admin as Basic user) and nginx (dav + dav-ext, 1 worker, no ` +
      `authentication) side by side over HTTPS on loopback with the gateway's certificate; curl --http1.1, rclone ` +
      `${spawnSync('rclone', ['version'], { encoding: 'utf8' }).stdout?.split('\n')[0] ?? ''}. Each transfer ` +
      `${RUNS}× per server, alternating order, best kept; shared 2-core machine. MB/s = 10^6 bytes/s; RSS = VmRSS ` +
      `sampled every 100 ms, MiB.`,
    durabilityNote('nginx') +
      ` The ${sizeLabel} PUT is also timed with an fsync of the file nginx stored added (like for like with \`fsync\`).`,
  ],
  rows,
  started,
);
writeResults('webdav', text, figures);
