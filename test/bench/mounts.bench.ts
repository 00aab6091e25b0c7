/**
 * Mounted drives benchmark (issue 18): the gateway mounted as a disk with real clients, beside the
 * same clients on OpenSSH's sftp-server and nginx's WebDAV, in one run.
 *
 * - The gateway is its own process (`svc-gateway serve`, compiled: `npm run bench:mounts` compiles
 *   first), SQLite and the local blob store, signed in as the site admin by password. The peers:
 *   an sshd on loopback with its own config and a throwaway local user, nginx with dav and dav-ext
 *   over HTTPS with the gateway's certificate.
 * - Six mounts: sshfs, rclone mount over sftp, rclone mount over webdav (`vendor=owncloud` on the
 *   gateway, `vendor=other` on nginx), each on the gateway and on its peer; rclone with
 *   `--vfs-cache-mode writes`. On each, test/protocols/mounts/workload.sh runs once; then the
 *   mount is ended and made again (fresh client caches) and the times are looked at: the
 *   `touch -d` time, a third `rsync -a` (files sent), and for rclone an `rclone sync` of the same
 *   folder and the time `rclone lsl` shows.
 * - sshfs throughput beside OpenSSH: a 1 GiB write (dd of a random file, until dd's close returns
 *   plus the unmount), a 1 GiB read after a remount, the unpack of a 2,000-file tar. Each row runs
 *   RUNS times, gateway and OpenSSH alternating who goes first; the median is kept.
 *
 *   npm run bench:mounts
 *   SVC_BENCH_FILE_MB=256 npm run bench:mounts      (a smaller big file, for a quick look)
 *
 * Needs root, /dev/fuse, sshfs, rclone and fusermount3. The table is printed and written to
 * test/bench/results-mounts.md; the gateway's log (JSON lines, info) is kept in the temp dir
 * named at the end.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { serveProcess, stopProcess, type ServedProcess } from '../helpers/process.ts';
import {
  api,
  cleanups,
  davTools,
  f0,
  f1,
  f2,
  FILE_BYTES,
  freePort,
  generate,
  mbps,
  md5File,
  must,
  run,
  runCleanups,
  type Row,
  seconds,
  SIZE_LABEL,
  startNginx,
  startSshd,
  stopChild,
  systemUser,
  table,
} from './lib.ts';

const RUNS = 2;
const TREE_FILES = 2000;
const PASSWORD = 'Mount-bench-pass-7';
const SYS_USER = 'svcbenchmount';
const WORKLOAD = path.resolve('test/protocols/mounts/workload.sh');
const TOUCHED = 1546300800; // workload.sh's touch -d '2019-01-01 00:00:00' (UTC)

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Mounts

/** Mount is one mounted client: its folder, how to wait for its uploads and how to end it. */
interface Mount {
  dir: string;
  /** settle resolves once the client has sent the server everything it holds */
  settle(): Promise<void>;
  /** unmount unmounts (fusermount3 -u) and waits until the client process has exited */
  unmount(): Promise<void>;
}

const isMounted = async (dir: string) => (await run(['mountpoint', '-q', dir])).code === 0;

/**
 * mount runs a FUSE client in the foreground (`argv`, `input` on its stdin), waits for `dir` to be
 * a mount point and registers its unmount in cleanups. With `rc`, settle asks rclone's remote
 * control until its VFS cache has no upload queued or in progress.
 */
async function mount(dir: string, argv: string[], input = '', rc?: string): Promise<Mount> {
  mkdirSync(dir, { recursive: true });
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'ignore', 'pipe'] });
  let log = '';
  child.stderr!.on('data', (c: Buffer) => (log = (log + c.toString()).slice(-4000)));
  child.stdin!.end(input);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const unmount = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    for (let i = 0; i < 20 && (await isMounted(dir)); i++) {
      if ((await run(['fusermount3', '-u', dir])).code !== 0) await sleep(500);
    }
    if (await isMounted(dir)) await run(['fusermount3', '-uz', dir]);
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    await exited;
    clearTimeout(timer);
  };
  cleanups.push(unmount);
  for (let i = 0; !(await isMounted(dir)); i++) {
    if (child.exitCode !== null || i >= 150) {
      await unmount();
      throw new Error(`${argv.slice(0, 2).join(' ')}: ${dir} not mounted (exit ${child.exitCode}): ${log}`);
    }
    await sleep(100);
  }
  const settle = async () => {
    if (!rc) return;
    for (let i = 0; i < 1200; i++) {
      const r = await run(['rclone', 'rc', '--url', `http://${rc}/`, 'vfs/stats']);
      const cache = (
        JSON.parse(r.stdout || '{}') as { diskCache?: { uploadsInProgress: number; uploadsQueued: number } }
      ).diskCache;
      if (cache && cache.uploadsInProgress + cache.uploadsQueued === 0) return;
      await sleep(500);
    }
    throw new Error(`rclone still uploading after 10 minutes: ${log}`);
  };
  return { dir, settle, unmount };
}

/** Target is one column: a client on a server, and how to mount it. */
interface Target {
  label: string;
  client: 'sshfs' | 'rclone-sftp' | 'rclone-webdav';
  server: 'gateway' | 'OpenSSH' | 'nginx';
  /** the rclone remote (connection string) and its extra flags; none for sshfs */
  remote?: string;
  flags?: string[];
  /** sshfs's user@host:path */
  sshfs?: string;
  port?: number;
}

async function mountTarget(t: Target, dir: string, cacheDir: string): Promise<Mount> {
  if (t.client === 'sshfs') {
    // idmap=user: the files of the remote user show as the mounting user's (root here), as when a user
    // mounts their own account; without it, OpenSSH's files show the throwaway user's uid, and root's
    // tar, git and cp -p trip over that (chown refused, "dubious ownership"), not over the server.
    const options = 'password_stdin,idmap=user,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null';
    return mount(dir, ['sshfs', '-f', '-p', String(t.port), '-o', options, t.sshfs!, dir], `${PASSWORD}\n`);
  }
  const rc = `127.0.0.1:${await freePort()}`;
  return mount(
    dir,
    [
      'rclone',
      'mount',
      t.remote!,
      dir,
      '--config',
      '/dev/null',
      '--vfs-cache-mode',
      'writes',
      '--cache-dir',
      cacheDir,
      '--rc',
      '--rc-addr',
      rc,
      '--rc-no-auth',
      ...(t.flags ?? []),
    ],
    '',
    rc,
  );
}

// ---------------------------------------------------------------------------------------------
// The tree, the table cells

/** makeTree writes TREE_FILES files of 0–8,000 random bytes in 40 × 7 folders, as a tar at `tar`. */
async function makeTree(dir: string, tar: string): Promise<void> {
  for (let i = 0; i < TREE_FILES; i++) {
    const d = path.join(dir, 'tree', `d${i % 40}`, `sub${i % 7}`);
    mkdirSync(d, { recursive: true });
    writeFileSync(path.join(d, `f${i}.txt`), randomBytes((i * 7919) % 8001));
  }
  await must(['tar', '-cf', tar, '-C', dir, 'tree']);
}

/** cell shortens a step's outcome for a table cell. */
function cell(outcome: string): string {
  const text = outcome.replace(/\s+/g, ' ').trim();
  const short = text.length > 110 ? `${text.slice(0, 107)}…` : text;
  return short.replace(/\|/g, '\\|');
}

function stepTable(title: string, names: string[], results: Map<string, Map<string, string>>): string {
  const labels = [...results.keys()];
  return [
    title,
    '',
    `| step | ${labels.join(' | ')} |`,
    `|---|${labels.map(() => '---').join('|')}|`,
    ...names.map((n) => `| ${n} | ${labels.map((l) => cell(results.get(l)!.get(n) ?? '—')).join(' | ')} |`),
  ].join('\n');
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

// ---------------------------------------------------------------------------------------------
// The run

const started = performance.now();
const rows: Row[] = [];
const notes: string[] = [];
const steps = new Map<string, Map<string, string>>();
const after = new Map<string, Map<string, string>>();
const stepNames: string[] = [];
const afterNames = [
  '`touch -d` time after a remount',
  'third `rsync -a` after a remount: files sent',
  '`rclone sync` of rs/ after the workload: files sent',
  '`rclone lsl` time of the `touch -d` file (2019-01-01 00:00:00)',
];
let gw: ServedProcess | null = null;
const logFile = path.join(os.tmpdir(), 'svc-bench-mounts-gateway.log');

try {
  if (!existsSync('/dev/fuse')) throw new Error('needs /dev/fuse');
  for (const bin of ['sshfs', 'rclone', 'fusermount3', 'rsync', 'sqlite3', 'git'])
    if ((await run(['which', bin])).code !== 0) throw new Error(`${bin} is missing`);
  if (!existsSync('dist/.built'))
    console.log('dist/ is not built: the gateway runs from its TypeScript sources');
  const tools = davTools();

  // The work dir is world-traversable: sftp-server runs as the bench user, nginx's worker as nobody.
  const work = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-mounts-'));
  cleanups.push(() => rmSync(work, { recursive: true, force: true }));
  chmodSync(work, 0o755);
  const tar = path.join(work, 'tree.tar');
  await makeTree(path.join(work, 'src'), tar);
  const big = path.join(work, 'big.bin');
  const bigMd5 = generate(big, FILE_BYTES);

  // The gateway process.
  const dataDir = path.join(work, 'data');
  gw = await serveProcess(dataDir, {
    SVC_ADMIN_PASSWORD: PASSWORD,
    SVC_FTP_PORT: 'off',
    SVC_FTPS_PORT: 'off',
  });
  const served = gw;
  served.child.once('exit', (code, signal) => console.log(`gateway exited: code ${code}, signal ${signal}`));
  cleanups.push(async () => {
    await stopProcess(served);
    writeFileSync(logFile, served.stderr.join('\n') + '\n');
  });
  const cert = path.join(dataDir, 'tls', 'cert.pem');
  const rest = { port: gw.ports.https!, dataDir };
  const session = (
    await api<{ id: string }>(rest, 'POST', '/sessions', { username: 'admin', password: PASSWORD })
  ).id;
  console.log(`gateway pid ${gw.child.pid}: SFTP :${gw.ports.sftp}, WebDAV :${gw.ports.webdav}`);

  // OpenSSH: a throwaway local user whose home is the sftp root.
  const home = path.join(work, 'sshd-home');
  const sdir = path.join(work, 'sshd');
  mkdirSync(home);
  mkdirSync(sdir);
  const { uid, gid } = systemUser(SYS_USER, home, PASSWORD);
  chownSync(home, uid, gid);
  const sshd = await startSshd(sdir, SYS_USER);
  console.log(`sshd pid ${sshd.child.pid} on :${sshd.port} (${sshd.version}), user ${SYS_USER}`);

  // nginx with dav and dav-ext, the gateway's certificate.
  const davRoot = path.join(work, 'dav');
  mkdirSync(davRoot);
  chmodSync(davRoot, 0o777);
  const ngx = await startNginx(
    tools.nginx,
    path.join(work, 'nginx'),
    davRoot,
    path.dirname(cert),
    tools.davExt,
  );
  cleanups.push(() => stopChild(ngx.child));
  console.log(`nginx on :${ngx.port}${tools.davExt ? ' with dav-ext' : ' WITHOUT dav-ext'}`);

  const obscured = (await must(['rclone', 'obscure', PASSWORD])).stdout.trim();
  const ca = ['--ca-cert', cert];
  const targets: Target[] = [
    {
      label: 'sshfs gateway',
      client: 'sshfs',
      server: 'gateway',
      sshfs: 'admin@127.0.0.1:/',
      port: gw.ports.sftp,
    },
    {
      label: 'sshfs OpenSSH',
      client: 'sshfs',
      server: 'OpenSSH',
      sshfs: `${SYS_USER}@127.0.0.1:${home}`,
      port: sshd.port,
    },
    {
      label: 'rclone-sftp gateway',
      client: 'rclone-sftp',
      server: 'gateway',
      remote: `:sftp,host=127.0.0.1,port=${gw.ports.sftp},user=admin,pass=${obscured}:`,
    },
    {
      label: 'rclone-sftp OpenSSH',
      client: 'rclone-sftp',
      server: 'OpenSSH',
      remote: `:sftp,host=127.0.0.1,port=${sshd.port},user=${SYS_USER},pass=${obscured}:`,
    },
    {
      label: 'rclone-webdav gateway',
      client: 'rclone-webdav',
      server: 'gateway',
      remote: `:webdav,url='https://127.0.0.1:${gw.ports.webdav}/',vendor=owncloud,user=admin,pass=${obscured}:`,
      flags: ca,
    },
    {
      label: 'rclone-webdav nginx',
      client: 'rclone-webdav',
      server: 'nginx',
      remote: `:webdav,url='https://127.0.0.1:${ngx.port}/',vendor=other:`,
      flags: ca,
    },
  ];

  // The workload on every mount, then the times after a remount.
  for (const [i, t] of targets.entries()) {
    const dir = path.join(work, `mnt-${i}`);
    const cache = path.join(work, `cache-${i}`);
    const local = path.join(work, `local-${i}`);
    const mine = new Map<string, string>();
    const later = new Map<string, string>();
    steps.set(t.label, mine);
    after.set(t.label, later);
    const t0 = performance.now();
    let m = await mountTarget(t, dir, cache);
    // Each mount works in its own folder: both gateway mounts see the site root, both OpenSSH ones the home.
    const folder = `w${i}`;
    const w = path.join(dir, folder);
    const r = await run(['bash', WORKLOAD, w, local, tar], { timeoutMs: 1_200_000 });
    for (const line of r.stdout.split('\n').filter((l) => l.startsWith('STEP '))) {
      const [, name, ...rest] = line.split(' ');
      if (!stepNames.includes(name!)) stepNames.push(name!);
      mine.set(name!, rest.join(' ').replace(/^FAIL /, 'FAIL: '));
    }
    if (mine.size === 0) mine.set('unpack', `FAIL: workload exited ${r.code}: ${r.stderr.slice(-200)}`);
    await m.settle();
    console.log(
      `${t.label}: workload in ${f0(seconds(t0))} s; ` +
        `${[...mine].filter(([, v]) => v !== 'ok').length} of ${mine.size} steps failed`,
    );
    for (const [name, v] of mine) if (v !== 'ok') console.log(`  ${name}: ${v}`);
    await m.unmount();

    m = await mountTarget(t, dir, cache);
    const stat = await run(['stat', '-c', '%Y %y', path.join(w, 'touched')]);
    const [secs, ...shown] = stat.stdout.trim().split(' ');
    later.set(
      afterNames[0]!,
      Number(secs) === TOUCHED ? 'ok' : `FAIL: ${shown.join(' ').slice(0, 19) || stat.stderr}`,
    );
    const rs = await run(['rsync', '-a', '--stats', `${local}/rs/`, `${w}/rs/`]);
    const sent = /^Number of regular files transferred: (\S+)/m.exec(rs.stdout)?.[1] ?? `exit ${rs.code}`;
    later.set(afterNames[1]!, sent === '0' ? 'ok (0)' : `FAIL: ${sent} sent`);
    await m.settle();
    await m.unmount();

    if (t.remote) {
      const base = [...(t.flags ?? []), '--config', '/dev/null'];
      const sync = await run(['rclone', 'sync', `${local}/rs`, `${t.remote}${folder}/rs`, '-v', ...base]);
      const n =
        sync.code === 0 ? String((sync.stderr.match(/: Copied \(/g) ?? []).length) : `exit ${sync.code}`;
      later.set(afterNames[2]!, n === '0' ? 'ok (0)' : `FAIL: ${n} sent`);
      const lsl = await run(['rclone', 'lsl', `${t.remote}${folder}/touched`, ...base]);
      const when = /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/.exec(lsl.stdout)?.[0] ?? `exit ${lsl.code}`;
      later.set(afterNames[3]!, when === '2019-01-01 00:00:00' ? 'ok' : `FAIL: ${when}`);
    }
    for (const [name, v] of later) console.log(`  ${name}: ${v}`);
  }

  // sshfs throughput beside OpenSSH.
  const sshfsTargets = targets.filter((t) => t.client === 'sshfs');
  const figures = new Map<string, { write: number[]; read: number[]; unpack: number[] }>();
  for (const t of sshfsTargets) figures.set(t.server, { write: [], read: [], unpack: [] });
  const stored = async (t: Target, name: string) => {
    if (t.server === 'OpenSSH') return `${await md5File(path.join(home, name))}`;
    return (await api<{ md5: string | null }>({ ...rest, session }, 'GET', `/files/${name}`)).md5;
  };
  for (let i = 0; i < RUNS; i++) {
    for (const t of i % 2 === 0 ? sshfsTargets : [...sshfsTargets].reverse()) {
      const dir = path.join(work, `tp-${t.server}`);
      const name = `big-${i}.bin`;
      const f = figures.get(t.server)!;
      let m = await mountTarget(t, dir, '');
      let t0 = performance.now();
      await must(['dd', `if=${big}`, `of=${path.join(dir, name)}`, 'bs=1M', 'status=none']);
      await m.unmount();
      f.write.push(mbps(FILE_BYTES, seconds(t0)));
      const md5 = await stored(t, name);
      if (md5 !== bigMd5) throw new Error(`${t.label}: ${name} stored with md5 ${md5}, want ${bigMd5}`);

      m = await mountTarget(t, dir, '');
      t0 = performance.now();
      await must(['dd', `if=${path.join(dir, name)}`, 'of=/dev/null', 'bs=1M', 'status=none']);
      f.read.push(mbps(FILE_BYTES, seconds(t0)));
      rmSync(path.join(dir, name));

      const into = path.join(dir, `unpack-${i}`);
      mkdirSync(into);
      t0 = performance.now();
      await must(['tar', '-xf', tar, '-C', into], { timeoutMs: 900_000 });
      f.unpack.push(TREE_FILES / seconds(t0));
      await m.unmount();
      console.log(
        `${t.label} #${i + 1}: write ${f1(f.write.at(-1)!)} MB/s, read ${f1(f.read.at(-1)!)} MB/s, ` +
          `unpack ${f0(f.unpack.at(-1)!)} files/s`,
      );
    }
  }
  const g = figures.get('gateway')!;
  const o = figures.get('OpenSSH')!;
  const both = (xs: number[], fmt: (x: number) => string) => xs.map(fmt).join(', ');
  for (const [metric, key, fmt] of [
    [
      `sshfs write ${SIZE_LABEL} (dd bs=1M of a random file, until close + unmount), md5 checked, MB/s`,
      'write',
      f0,
    ],
    [`sshfs read ${SIZE_LABEL} (dd bs=1M to /dev/null after a remount), MB/s`, 'read', f0],
    [`sshfs unpack of ${TREE_FILES} files (tar -x, 0–8 kB each, 280 folders), files/s`, 'unpack', f0],
  ] as const) {
    rows.push({
      metric: `${metric}; median of ${RUNS} (runs: ${both(g[key], fmt)})`,
      value: fmt(median(g[key])),
      peer: `OpenSSH: ${fmt(median(o[key]))} (runs: ${both(o[key], fmt)})`,
      ratio: f2(median(g[key]) / median(o[key])),
    });
  }

  const versions = [
    // sshfs --version prints fusermount3's version first.
    /SSHFS version \S+/.exec((await run(['sshfs', '--version'])).stdout)?.[0] ?? 'sshfs',
    (await run(['rclone', 'version'])).stdout.split('\n')[0] ?? '',
    sshd.version,
    (await run([tools.nginx, '-v'])).stderr.trim(),
  ];
  notes.push(
    `Gateway: \`svc-gateway serve\` (compiled dist/), SQLite, local blob store, the site admin by password. ` +
      `Peers: ${versions[2]} sshd with sftp-server, a local user; ${versions[3]} with dav and ` +
      `${tools.davExt ? 'dav-ext' : 'NO dav-ext'}, over HTTPS with the gateway's certificate. Clients: ${versions[0]}, ` +
      `${versions[1]} (mount with --vfs-cache-mode writes; webdav vendor owncloud on the gateway, other on nginx). ` +
      `Throughput rows run ${RUNS}× each, gateway and OpenSSH alternating who goes first; the median (of 2: the mean) ` +
      `is kept and both runs are shown. MB/s = 10^6 bytes/s; ratio = gateway/OpenSSH.`,
  );
} finally {
  await runCleanups();
}

const refusals = (gw?.stderr ?? []).filter((l) => /refused|failed|"level":"(warn|error)"/.test(l));
const extra = [
  stepTable(
    `Everyday workload (test/protocols/mounts/workload.sh), one run per mount; a failure shows its reason, shortened:`,
    stepNames,
    steps,
  ),
  '',
  stepTable(
    'After the workload: the mount ended and made again (fresh client caches), then the times; `rclone sync` and ' +
      '`rclone lsl` run on the remote directly after the unmount (— for sshfs):',
    afterNames,
    after,
  ),
  '',
  `Gateway log: ${refusals.length} refusal or warning lines at info or above during the run` +
    (refusals.length ? '; the first ones:' : '.'),
  ...(refusals.length ? ['', '```', ...refusals.slice(0, 12).map((l) => l.slice(0, 300)), '```'] : []),
].join('\n');
const text = table('Mounted drives benchmark', notes, rows, started, extra);
console.log(`\n${text}\n\ngateway log: ${logFile}`);
writeFileSync(path.join('test', 'bench', 'results-mounts.md'), `${text}\n`);
