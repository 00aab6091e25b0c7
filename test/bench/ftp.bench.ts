/**
 * FTP benchmark (issues 4 and 12): the gateway's FTP front end side by side with vsftpd (Debian)
 * on loopback, in one run: 1 GiB STOR and RETR with lftp, plain and explicit TLS (AUTH TLS, PROT P),
 * as a ratio to vsftpd; 1,000 files of 4 KiB with `lftp mirror -R` and back, files per second,
 * plain and, down, over FTPS on TLS 1.3 and on TLS 1.2; MLSD (and LIST) of a 10,000-entry folder
 * with curl, and connect + login + the listing of an empty folder; the gateway's RSS during the big
 * transfers and with 1,000 idle logged-in control connections, beside vsftpd's processes.
 *
 * The gateway runs as an operator runs it: `svc-gateway serve` from the compiled dist/
 * (`npm run bench:ftp` compiles first), at SVC_DURABILITY (fsync by default, or os), on SQLite
 * with the local blob store, its open-file limit
 * raised with prlimit and its connection limits set for 1,000 connections; a regular user (user_root
 * the site root, grant full) logs in. /big gets its 10,000 rows written into the SQLite file.
 * vsftpd runs from its own configs in a temp dir, as a throwaway local user created for the run
 * (useradd, removed at the end): one instance plain, one for FTPS as a deployment would run it
 * (its own self-signed P-256 certificate like the gateway's, TLS forced for logins and data,
 * require_ssl_reuse=YES as the gateway's ftp.require_session_reuse). Every transfer runs twice,
 * gateway and vsftpd interleaved, and the best time counts (the machine is shared).
 *
 *   npm run bench:ftp
 *   SVC_DURABILITY=os npm run bench:ftp          (the gateway leaves uploads to the page cache)
 *   SVC_BENCH_FILE_MB=256 npm run bench:ftp      (a smaller big file, for a quick look)
 *   SVC_BENCH_QUICK=1 npm run bench:ftp          (a smoke run: 64 MiB, 100 small files, 1 repetition)
 *
 * MB/s are 10^6 bytes per second; RSS is VmRSS in MiB. The table is printed and written to
 * test/bench/results-ftp.md (results-ftp-os.md at os), its figures to results-ftp[-os].json for
 * the summary of `npm run bench`. Needs root (useradd, vsftpd, prlimit); installs vsftpd and lftp if
 * missing.
 */
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  api,
  benchTitle,
  best,
  cleanups,
  closeFtp,
  CpuMeter,
  DURABILITY,
  durabilityNote,
  ensurePackage,
  f0,
  f1,
  f2,
  type Figure,
  FILE_BYTES,
  ftpLogin,
  generate,
  IDLE_SOURCES,
  kib,
  md5File,
  mbps,
  memory,
  must,
  noFsync,
  openMany,
  perConnection,
  populateSqlite,
  processTree,
  QUICK,
  RSS_LIMIT_MIB,
  RssSampler,
  run,
  runCleanups,
  type Row,
  RUNS,
  seconds,
  serveCompiled,
  settle,
  SIZE_LABEL,
  SMALL_FILES,
  smallFiles,
  startVsftpd,
  systemUser,
  table,
  timed,
  writeResults,
} from './lib.ts';

const SMALL_BYTES = 4096;
const LIST_ENTRIES = 10_000;
const LIST_RUNS = 3;
/** IDLE_CONNECTIONS logged-in control connections are held open for the memory figure. */
const IDLE_CONNECTIONS = QUICK ? 100 : 1000;
const USER = 'ftpbench';
const PASSWORD = 'Bench-password-1';
const SYS_USER = 'svcbenchftp';

type Mode = 'plain' | 'tls';
/** Tls is the TLS version lftp (GnuTLS) is held to, through its priority string. */
type Tls = '1.3' | '1.2';

/** Server is one side of the comparison: where lftp connects and how an upload is checked. */
interface Server {
  name: string;
  port: number;
  user: string;
  /** the md5 and size of an uploaded file, as the server has it */
  stored(remote: string): Promise<{ md5: string | null; size: number | null }>;
}

function lftpArgs(s: Server, mode: Mode, script: string, version?: Tls): string[] {
  const settings = [
    'set cmd:fail-exit yes',
    'set net:max-retries 1',
    'set net:timeout 60',
    'set ssl:verify-certificate no',
    'set ftp:passive-mode yes',
    'set xfer:clobber on',
    mode === 'plain' ? 'set ftp:ssl-allow no' : 'set ftp:ssl-force yes; set ftp:ssl-protect-data yes',
    ...(version ? [`set ssl:priority "NORMAL:-VERS-ALL:+VERS-TLS${version}"`] : []),
  ].join('; ');
  return [
    'lftp',
    '-c',
    `${settings}; open -u '${s.user}','${PASSWORD}' ftp://127.0.0.1:${s.port}; ${script}`,
  ];
}

/** loginMany logs `count` FTP control connections in, `parallel` at a time; all of them or it throws. */
async function loginMany(s: Server, count: number, parallel: number): Promise<net.Socket[]> {
  const { opened, error } = await openMany(count, parallel, (i) =>
    ftpLogin({ name: s.name, port: s.port, user: s.user, password: PASSWORD }, i),
  );
  if (error) {
    for (const socket of opened) socket.destroy();
    throw error;
  }
  return opened;
}

const rows: Row[] = [];
const figures: Figure[] = [];
/** pushSmall adds a small-file row and its figure from the gateway's and vsftpd's best seconds. */
const pushSmall = (metric: string, key: string, gs: number, vs: number, up: boolean) => {
  rows.push({
    metric,
    value: f0(SMALL_FILES / gs),
    peer: `${up ? noFsync('vsftpd') : 'vsftpd'}: ${f0(SMALL_FILES / vs)}`,
    ratio: f2(vs / gs),
  });
  figures.push({
    key,
    gateway: SMALL_FILES / gs,
    peer: SMALL_FILES / vs,
    peerName: 'vsftpd',
    unit: 'files/s',
    ...(up ? { peerFsyncs: false } : {}),
  });
};
const started = performance.now();
/** the 1-minute load average at the start: other work on the machine, said beside the figures */
const loadAtStart = os.loadavg()[0]!;

try {
  ensurePackage('/usr/sbin/vsftpd', 'vsftpd');
  ensurePackage('/usr/bin/lftp', 'lftp');
  ensurePackage('/usr/bin/curl', 'curl');
  ensurePackage('/usr/bin/openssl', 'openssl');
  ensurePackage('/usr/bin/prlimit', 'util-linux');

  // The work dir is world-traversable: vsftpd's sessions run as the bench user.
  const work = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-ftp-'));
  cleanups.push(() => rmSync(work, { recursive: true, force: true }));
  chmodSync(work, 0o755);
  const big = path.join(work, 'big.bin');
  let t = performance.now();
  const bigMd5 = generate(big, FILE_BYTES);
  console.log(`generated ${SIZE_LABEL} (md5 ${bigMd5}) in ${f1(seconds(t))} s in ${work}`);
  const small = path.join(work, 'small');
  mkdirSync(small);
  smallFiles(small, SMALL_FILES, SMALL_BYTES);

  // Passive ranges of our own below the kernel's ephemeral ports (32768 on), away from the
  // 30000-30099 and 23100-23109 other runs use: the gateway's 100, then vsftpd's two 100.
  const base = 24000 + 300 * Math.floor(Math.random() * 18);
  t = performance.now();
  const dataDir = path.join(work, 'data');
  const gw = await serveCompiled(
    dataDir,
    PASSWORD,
    {
      SVC_FTPS_PORT: 'off',
      SVC_SFTP_PORT: 'off',
      SVC_WEBDAV_PORT: 'off',
      SVC_FTP_PASV_PORTS: `${base}-${base + 99}`,
      // The defaults follow the open-file limit; the bench sets them for its 1,000 idle logins
      // (from IDLE_SOURCES addresses, so per address well under the default cap of 256).
      SVC_MAX_CONNECTIONS: '2000',
      SVC_MAX_CONNECTIONS_PER_ADDRESS: '256',
      SVC_MAX_SESSIONS_PER_USER: '2000',
    },
    { prefix: ['prlimit', '--nofile=8192:8192', '--'] },
  );
  const gwPid = gw.pid;
  const rest = gw.rest;
  await api(rest, 'POST', '/users', {
    username: USER,
    password: PASSWORD,
    user_root: '',
    grant_permission: 'full',
  });
  await api(rest, 'POST', '/folders/big', {});
  await api(rest, 'POST', '/folders/empty', {});
  t = performance.now();
  populateSqlite(dataDir, LIST_ENTRIES);
  console.log(
    `gateway pid ${gwPid} (compiled, durability ${DURABILITY}), FTP :${gw.ports.ftp}, passive ${base}-${base + 99}, /big populated with ` +
      `${LIST_ENTRIES} rows in ${f0(seconds(t) * 1000)} ms`,
  );
  const gateway: Server = {
    name: 'gateway',
    port: gw.ports.ftp!,
    user: USER,
    stored: async (remote) => {
      const e = await api<{ md5: string | null; size: number | null }>(rest, 'GET', `/files/${remote}`);
      return { md5: e.md5, size: e.size };
    },
  };

  // vsftpd: a local user whose home is in the work dir; one instance plain, one for FTPS.
  const home = path.join(work, 'vsftpd-home');
  const vdir = path.join(work, 'vsftpd');
  mkdirSync(home);
  mkdirSync(path.join(vdir, 'empty'), { recursive: true });
  const { uid, gid } = systemUser(SYS_USER, home, PASSWORD);
  mkdirSync(path.join(home, 'big'));
  mkdirSync(path.join(home, 'empty'));
  for (let i = 0; i < LIST_ENTRIES; i++)
    writeFileSync(path.join(home, 'big', `f${String(i).padStart(7, '0')}.bin`), '');
  chownSync(home, uid, gid);
  // Its own certificate, of the gateway's kind (P-256), so the handshakes cost alike.
  await must([
    'openssl',
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=localhost',
    '-keyout',
    path.join(vdir, 'key.pem'),
    '-out',
    path.join(vdir, 'cert.pem'),
  ]);
  const vPlain = await startVsftpd(vdir, 'plain', base + 100, ['ssl_enable=NO']);
  const vTls = await startVsftpd(vdir, 'ftps', base + 200, [
    'ssl_enable=YES',
    `rsa_cert_file=${path.join(vdir, 'cert.pem')}`,
    `rsa_private_key_file=${path.join(vdir, 'key.pem')}`,
    'force_local_logins_ssl=YES',
    'force_local_data_ssl=YES',
    // vsftpd's default, as the gateway's ftp.require_session_reuse (default on); GnuTLS (lftp)
    // resumes the control connection's session on each data connection.
    'require_ssl_reuse=YES',
    'ssl_ciphers=HIGH',
  ]);
  const vStored = async (remote: string) => {
    const file = path.join(home, remote);
    return { md5: await md5File(file), size: statSync(file).size };
  };
  const peer: Server = { name: 'vsftpd', port: vPlain.port, user: SYS_USER, stored: vStored };
  const peerTls: Server = { name: 'vsftpd', port: vTls.port, user: SYS_USER, stored: vStored };
  const servers = [gateway, peer];
  const peerFor = (mode: Mode) => (mode === 'tls' ? peerTls : peer);

  // 1,000 idle logged-in control connections, first, on the freshly started gateway (the big
  // transfers below leave the heap larger). vsftpd forks a process per connection, and another
  // once logged in: its figure is the sum over its processes, VmRSS (counts shared pages in each)
  // and Pss (shared pages divided among their sharers, the comparable figure).
  {
    await settle();
    const before = kib(`/proc/${gwPid}/status`, 'VmRSS') / 1024;
    t = performance.now();
    const held = await loginMany(gateway, IDLE_CONNECTIONS, 20);
    const loginS = seconds(t);
    await settle();
    const during = kib(`/proc/${gwPid}/status`, 'VmRSS') / 1024;
    const gwPss = kib(`/proc/${gwPid}/smaps_rollup`, 'Pss') / 1024;
    await closeFtp(held);
    console.log(
      `gateway, ${IDLE_CONNECTIONS} idle logins in ${f1(loginS)} s: RSS ${f0(before)} → ${f0(during)} MiB (Pss ${f0(gwPss)})`,
    );
    const vBefore = memory(processTree(vPlain.child.pid!));
    t = performance.now();
    const vHeld = await loginMany(peer, IDLE_CONNECTIONS, 20);
    const vLoginS = seconds(t);
    await settle();
    const vDuring = memory(processTree(vPlain.child.pid!));
    await closeFtp(vHeld);
    console.log(
      `vsftpd, ${IDLE_CONNECTIONS} idle logins in ${f1(vLoginS)} s: ${vDuring.processes} processes, ` +
        `RSS ${f0(vBefore.rss)} → ${f0(vDuring.rss)} MiB, Pss ${f0(vBefore.pss)} → ${f0(vDuring.pss)} MiB`,
    );
    rows.push({
      metric:
        `VmRSS with ${IDLE_CONNECTIONS} idle logged-in FTP control connections (from ${IDLE_SOURCES} loopback ` +
        `addresses), MiB (gateway: one process, ${f0(before)} before the logins, ${perConnection(before, during, IDLE_CONNECTIONS)} KiB ` +
        `per connection, within the heap's own swings; vsftpd: the sum over its ${vDuring.processes} processes, ` +
        `its Pss sum in brackets, ${perConnection(vBefore.pss, vDuring.pss, IDLE_CONNECTIONS)} KiB Pss per connection; ` +
        `ratio: gateway VmRSS / vsftpd Pss)`,
      value: f0(during),
      peer: `vsftpd: ${f0(vDuring.rss)} (Pss ${f0(vDuring.pss)})`,
      ratio: f2(during / vDuring.pss),
    });
    rows.push({
      metric:
        `${IDLE_CONNECTIONS} FTP logins (USER, PASS), 20 at a time, s (the gateway checks each password with ` +
        `bcrypt, accounts.bcrypt_rounds 10; vsftpd through PAM, the system's yescrypt)`,
      value: f1(loginS),
      peer: `vsftpd: ${f1(vLoginS)}`,
      ratio: f2(loginS / vLoginS),
    });
  }

  // 1 GiB STOR and RETR, plain and TLS; the gateway's RSS sampled during its own transfers.
  const rss = new RssSampler(gwPid);
  const idle = rss.idle;
  const cpu = new CpuMeter(gwPid);
  const down = path.join(work, 'down.bin');
  const result = new Map<string, { s: number; cpu: number }>();
  const keep = (key: string, s: number, c: number) => {
    const old = result.get(key);
    if (!old || s < old.s) result.set(key, { s, cpu: c });
  };
  /** measured runs a transfer; for the gateway it samples RSS and measures CPU meanwhile. */
  const measured = async (sample: boolean, f: () => Promise<number>) => {
    if (!sample) return { s: await f(), cpu: 0 };
    rss.start();
    cpu.start();
    try {
      return { s: await f(), cpu: cpu.stop() };
    } finally {
      rss.pause();
    }
  };
  for (const mode of ['plain', 'tls'] as Mode[]) {
    for (let i = 0; i < RUNS; i++) {
      for (const s of [gateway, peerFor(mode)]) {
        const remote = `up-${mode}.bin`;
        const upS = await measured(s === gateway, () => timed(lftpArgs(s, mode, `put ${big} -o ${remote}`)));
        const got = await s.stored(remote);
        if (got.md5 !== bigMd5 || got.size !== FILE_BYTES)
          throw new Error(`${s.name} ${mode} STOR stored ${got.size} bytes, md5 ${got.md5}`);
        keep(`${s.name} STOR ${mode}`, upS.s, upS.cpu);
        console.log(`${s.name} STOR ${mode} #${i + 1}: ${f1(mbps(FILE_BYTES, upS.s))} MB/s (${f1(upS.s)} s)`);

        rmSync(down, { force: true });
        const downS = await measured(s === gateway, () =>
          timed(lftpArgs(s, mode, `get ${remote} -o ${down}`)),
        );
        const size = statSync(down).size;
        const md5 = i === 0 ? await md5File(down) : bigMd5;
        if (size !== FILE_BYTES || md5 !== bigMd5)
          throw new Error(`${s.name} ${mode} RETR gave ${size} bytes, md5 ${md5}`);
        rmSync(down);
        keep(`${s.name} RETR ${mode}`, downS.s, downS.cpu);
        console.log(
          `${s.name} RETR ${mode} #${i + 1}: ${f1(mbps(FILE_BYTES, downS.s))} MB/s (${f1(downS.s)} s)`,
        );
      }
    }
  }
  for (const mode of ['plain', 'tls'] as Mode[]) {
    for (const op of ['STOR', 'RETR']) {
      const g = result.get(`gateway ${op} ${mode}`)!;
      const v = result.get(`vsftpd ${op} ${mode}`)!;
      const label = mode === 'plain' ? 'plain' : 'explicit TLS (AUTH TLS, PROT P)';
      rows.push({
        metric:
          `${op} ${SIZE_LABEL}, lftp, ${label}, md5 checked, best of ${RUNS}, MB/s ` +
          `(gateway CPU ${f0(g.cpu)}% of a core)`,
        value: f0(mbps(FILE_BYTES, g.s)),
        peer: `${op === 'STOR' ? noFsync('vsftpd') : 'vsftpd'}: ${f0(mbps(FILE_BYTES, v.s))}`,
        ratio: f2(v.s / g.s),
      });
      figures.push({
        key: `${op.toLowerCase()}.${mode}`,
        gateway: mbps(FILE_BYTES, g.s),
        peer: mbps(FILE_BYTES, v.s),
        peerName: 'vsftpd',
        unit: 'MB/s',
        ...(op === 'STOR' ? { peerFsyncs: false } : {}),
      });
    }
  }
  rows.push({
    metric: `gateway max RSS during the ${SIZE_LABEL} transfers, MiB (idle before: ${f0(idle)})`,
    value: f0(rss.max),
    peer: `limit ${RSS_LIMIT_MIB}`,
    ratio: f2(rss.max / RSS_LIMIT_MIB),
  });
  figures.push({ key: 'rss.transfer', gateway: rss.max, peer: null, peerName: '', unit: 'MiB' });

  // 1,000 × 4 KiB: mirror -R to a fresh remote folder, then mirror it back to a fresh local one.
  const perServer = new Map<string, { up: number; down: number }>();
  for (const s of servers) perServer.set(s.name, { up: Infinity, down: Infinity });
  for (let i = 0; i < RUNS; i++) {
    for (const s of servers) {
      const remote = `small${i}`;
      const back = path.join(work, `back-${s.name}-${i}`);
      const up = await timed(lftpArgs(s, 'plain', `mirror -R ${small} ${remote}`));
      const dn = await timed(lftpArgs(s, 'plain', `mirror ${remote} ${back}`));
      const n = readdirSync(back).length;
      if (n !== SMALL_FILES) throw new Error(`${s.name}: mirrored back ${n} files, want ${SMALL_FILES}`);
      rmSync(back, { recursive: true });
      const r = perServer.get(s.name)!;
      r.up = Math.min(r.up, up);
      r.down = Math.min(r.down, dn);
      console.log(
        `${s.name} ${SMALL_FILES} small files #${i + 1}: up ${f0(SMALL_FILES / up)} files/s, ` +
          `down ${f0(SMALL_FILES / dn)} files/s`,
      );
    }
  }
  const g = perServer.get('gateway')!;
  const v = perServer.get('vsftpd')!;
  for (const [dir, gs, vs, key] of [
    ['up (`mirror -R`)', g.up, v.up, 'up'],
    ['down (`mirror`)', g.down, v.down, 'down'],
  ] as const) {
    pushSmall(
      `${SMALL_FILES} × 4 KiB ${dir}, lftp plain, best of ${RUNS}, files/s`,
      `small.${key}.plain`,
      gs,
      vs,
      key === 'up',
    );
  }

  // FTPS, 1,000 × 4 KiB down with `mirror` of the folder uploaded above, TLS 1.3 and TLS 1.2, PROT P
  // (every data connection a TLS handshake resuming the control connection's session); on TLS 1.3
  // first up with `mirror -R` to a fresh folder, which the download then mirrors back.
  const tlsDown = new Map<string, number>();
  const tlsUp = new Map<string, number>();
  for (const version of ['1.3', '1.2'] as Tls[]) {
    for (let i = 0; i < RUNS; i++) {
      for (const s of [gateway, peerTls]) {
        const back = path.join(work, `back-tls-${s.name}-${i}`);
        let from = 'small0';
        if (version === '1.3') {
          from = `tls13-${i}`;
          const up = await timed(lftpArgs(s, 'tls', `mirror -R ${small} ${from}`, version), {
            timeoutMs: 600_000,
          });
          const key = `${s.name} ${version}`;
          tlsUp.set(key, Math.min(tlsUp.get(key) ?? Infinity, up));
          console.log(
            `${s.name} FTPS TLS ${version} ${SMALL_FILES} small files up #${i + 1}: ${f0(SMALL_FILES / up)} files/s`,
          );
        }
        const dn = await timed(lftpArgs(s, 'tls', `mirror ${from} ${back}`, version), { timeoutMs: 600_000 });
        const n = readdirSync(back).length;
        if (n !== SMALL_FILES)
          throw new Error(`${s.name} FTPS: mirrored back ${n} files, want ${SMALL_FILES}`);
        rmSync(back, { recursive: true });
        const key = `${s.name} ${version}`;
        tlsDown.set(key, Math.min(tlsDown.get(key) ?? Infinity, dn));
        console.log(
          `${s.name} FTPS TLS ${version} ${SMALL_FILES} small files down #${i + 1}: ${f0(SMALL_FILES / dn)} files/s`,
        );
      }
    }
    const gs = tlsDown.get(`gateway ${version}`)!;
    const vs = tlsDown.get(`vsftpd ${version}`)!;
    const gu = tlsUp.get(`gateway ${version}`);
    const vu = tlsUp.get(`vsftpd ${version}`);
    const how = `lftp FTPS TLS ${version} (AUTH TLS, PROT P, each data connection resumes the session)`;
    if (gu !== undefined && vu !== undefined)
      pushSmall(
        `${SMALL_FILES} × 4 KiB up (\`mirror -R\`), ${how}, best of ${RUNS}, files/s`,
        `small.up.tls${version}`,
        gu,
        vu,
        true,
      );
    pushSmall(
      `${SMALL_FILES} × 4 KiB down (\`mirror\`), ${how}, best of ${RUNS}, files/s`,
      `small.down.tls${version}`,
      gs,
      vs,
      false,
    );
  }

  // Listings of a 10,000-entry folder with curl (login included), and of an empty one (connect +
  // login + listing, as a client opening a session does). vsftpd has no MLSD: its LIST is the peer.
  const list = async (s: Server, command: 'MLSD' | 'LIST', folder = 'big', want = LIST_ENTRIES) =>
    best(LIST_RUNS, async () => {
      const t1 = performance.now();
      const r = await must([
        'curl',
        '-sS',
        '-u',
        `${s.user}:${PASSWORD}`,
        ...(command === 'MLSD' ? ['-X', 'MLSD'] : []),
        `ftp://127.0.0.1:${s.port}/${folder}/`,
      ]);
      const took = seconds(t1) * 1000;
      const n = r.stdout.split('\n').filter((l) => l.includes('f0')).length;
      if (n !== want) throw new Error(`${s.name} ${command} of ${folder} listed ${n} entries`);
      return took;
    });
  const login = async (s: Server) =>
    best(LIST_RUNS, async () => {
      const t1 = performance.now();
      await must(['curl', '-sS', '-u', `${s.user}:${PASSWORD}`, '-I', `ftp://127.0.0.1:${s.port}/`]);
      return seconds(t1) * 1000;
    });
  const gMlsd = await list(gateway, 'MLSD');
  const gList = await list(gateway, 'LIST');
  const vList = await list(peer, 'LIST');
  const gLogin = await login(gateway);
  const vLogin = await login(peer);
  const gEmpty = await list(gateway, 'LIST', 'empty', 0);
  const vEmpty = await list(peer, 'LIST', 'empty', 0);
  console.log(
    `listing ${LIST_ENTRIES}: gateway MLSD ${f0(gMlsd)} ms, LIST ${f0(gList)} ms; vsftpd LIST ${f0(vList)} ms ` +
      `(login only: gateway ${f0(gLogin)} ms, vsftpd ${f0(vLogin)} ms)`,
  );
  rows.push({
    metric: `MLSD of a ${LIST_ENTRIES}-entry folder, curl incl. login, best of ${LIST_RUNS}, ms (login alone: ${f0(gLogin)})`,
    value: f0(gMlsd),
    peer: `vsftpd LIST (no MLSD): ${f0(vList)}`,
    ratio: f2(gMlsd / vList),
  });
  rows.push({
    metric: `LIST of a ${LIST_ENTRIES}-entry folder, curl incl. login, best of ${LIST_RUNS}, ms (login alone: ${f0(gLogin)})`,
    value: f0(gList),
    peer: `vsftpd: ${f0(vList)} (login alone: ${f0(vLogin)})`,
    ratio: f2(gList / vList),
  });
  rows.push({
    metric: `connect + login + LIST of an empty folder, curl, best of ${LIST_RUNS}, ms`,
    value: f0(gEmpty),
    peer: `vsftpd: ${f0(vEmpty)}`,
    ratio: f2(gEmpty / vEmpty),
  });
  figures.push(
    { key: 'list.mlsd', gateway: gMlsd, peer: vList, peerName: 'vsftpd LIST', unit: 'ms' },
    { key: 'list.list', gateway: gList, peer: vList, peerName: 'vsftpd', unit: 'ms' },
    { key: 'login.empty', gateway: gEmpty, peer: vEmpty, peerName: 'vsftpd', unit: 'ms' },
  );
} finally {
  await runCleanups();
}

const text = table(
  benchTitle('FTP'),
  [
    `Gateway: \`svc-gateway serve\` from the compiled dist/, storage.durability ${DURABILITY}, SQLite, local blob store, open-file limit 8192 ` +
      `(prlimit), limits.max_connections 2000, max_connections_per_address 256, max_sessions_per_user 2000. ` +
      `vsftpd (Debian, own configs, a local user): one instance plain, one for FTPS with its own P-256 certificate, ` +
      `ssl_enable, force_local_logins_ssl and force_local_data_ssl YES, require_ssl_reuse=YES (its default, as the ` +
      `gateway's ftp.require_session_reuse). Loopback, side by side in one run, each transfer ${RUNS}× interleaved, ` +
      `best kept. MB/s = 10^6 bytes/s; ratio = gateway/vsftpd throughput (time ratio for listings and logins, ` +
      `RSS ratio for memory: lower is better). RSS = VmRSS sampled every 100 ms, MiB. ` +
      `Client: lftp ${/Version (\S+)/.exec((await run(['lftp', '--version'])).stdout)?.[1] ?? ''} (GnuTLS), the TLS version ` +
      `held by ssl:priority.`,
    durabilityNote('vsftpd'),
    `Load average (1 min) at the start ${f1(loadAtStart)}, at the end ${f1(os.loadavg()[0]!)}, on ` +
      `${os.cpus().length} cores: other work shares the machine, so absolute figures are lower and noisier than ` +
      `on an idle one; the ratios, measured side by side in one run, are what counts.`,
    `FTPS small files on TLS 1.3 are bounded by the client for both servers: GnuTLS sends the middlebox-` +
      `compatibility ChangeCipherSpec and its Finished as two writes on a data socket without TCP_NODELAY, so ` +
      `the Finished waits for the server's delayed ACK (about 40 ms) on every data connection. With ` +
      `%DISABLE_TLS13_COMPAT_MODE in lftp's ssl:priority a probe against the gateway went from 18 to 54 files/s; ` +
      `nothing a server sends changes it (Node cannot set TCP_QUICKACK).`,
  ],
  rows,
  started,
);
writeResults('ftp', text, figures);
