/**
 * FTP benchmark (issue 4): the gateway's FTP front end side by side with vsftpd (Debian) on
 * loopback, in one run: 1 GiB STOR and RETR with lftp, plain and explicit TLS (AUTH TLS, PROT P),
 * as a ratio to vsftpd; 1,000 files of 4 KiB with `lftp mirror -R` and back, files per second;
 * MLSD (and LIST) of a 10,000-entry folder with curl; the gateway's RSS during the big transfers.
 *
 * The gateway runs in its own process (test/bench/serve.ts gateway --ports ftp,ftps), on SQLite
 * with the local blob store, and logs in a regular user (user_root the site root, grant full).
 * vsftpd runs from its own config in a temp dir, as a throwaway local user created for the run
 * (useradd, removed at the end), TLS with the gateway's generated certificate. Every transfer runs
 * twice, gateway and vsftpd interleaved, and the best time counts (the machine is shared).
 *
 *   npm run bench:ftp
 *   SVC_BENCH_FILE_MB=256 npm run bench:ftp      (a smaller big file, for a quick look)
 *
 * MB/s are 10^6 bytes per second; RSS is VmRSS in MiB. The table is printed and written to
 * test/bench/results-ftp.md. Needs root (useradd, vsftpd); installs vsftpd and lftp if missing.
 */
import { type ChildProcess, spawn } from 'node:child_process';
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
import os from 'node:os';
import path from 'node:path';
import {
  api,
  best,
  cleanups,
  CpuMeter,
  ensurePackage,
  f0,
  f1,
  f2,
  FILE_BYTES,
  freePort,
  generate,
  type GatewayInfo,
  md5File,
  mbps,
  must,
  RSS_LIMIT_MIB,
  RssSampler,
  run,
  runCleanups,
  type Row,
  seconds,
  SIZE_LABEL,
  smallFiles,
  startGateway,
  stopChild,
  systemUser,
  table,
  timed,
  waitForPort,
} from './lib.ts';

const RUNS = 2;
const SMALL_FILES = 1000;
const SMALL_BYTES = 4096;
const LIST_ENTRIES = 10_000;
const LIST_RUNS = 3;
const USER = 'ftpbench';
const PASSWORD = 'Bench-password-1';
const SYS_USER = 'svcbenchftp';

type Mode = 'plain' | 'tls';

/** Server is one side of the comparison: where lftp connects and how an upload is checked. */
interface Server {
  name: string;
  port: number;
  user: string;
  /** the md5 and size of an uploaded file, as the server has it */
  stored(remote: string): Promise<{ md5: string | null; size: number | null }>;
}

function lftpArgs(s: Server, mode: Mode, script: string): string[] {
  const settings = [
    'set cmd:fail-exit yes',
    'set net:max-retries 1',
    'set net:timeout 60',
    'set ssl:verify-certificate no',
    'set ftp:passive-mode yes',
    'set xfer:clobber on',
    mode === 'plain' ? 'set ftp:ssl-allow no' : 'set ftp:ssl-force yes; set ftp:ssl-protect-data yes',
  ].join('; ');
  return [
    'lftp',
    '-c',
    `${settings}; open -u '${s.user}','${PASSWORD}' ftp://127.0.0.1:${s.port}; ${script}`,
  ];
}

const rows: Row[] = [];
const started = performance.now();

try {
  ensurePackage('/usr/sbin/vsftpd', 'vsftpd');
  ensurePackage('/usr/bin/lftp', 'lftp');
  ensurePackage('/usr/bin/curl', 'curl');

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

  // Passive ranges of our own, away from the default 30000-30099 other test runs use.
  const base = 40000 + 200 * Math.floor(Math.random() * 90);
  t = performance.now();
  const gw = await startGateway([
    '--ports',
    'ftp,ftps',
    '--pasv',
    `${base}-${base + 99}`,
    '--populate',
    String(LIST_ENTRIES),
  ]);
  cleanups.push(() => stopChild(gw.child));
  const info: GatewayInfo = gw.info;
  console.log(
    `gateway pid ${info.pid}, FTP :${info.ports.ftp}, passive ${base}-${base + 99}, /big populated with ` +
      `${LIST_ENTRIES} rows in ${info.populateMs} ms (up in ${f1(seconds(t))} s)`,
  );
  await api(info, 'POST', '/users', {
    username: USER,
    password: PASSWORD,
    user_root: '',
    grant_permission: 'full',
  });
  const gateway: Server = {
    name: 'gateway',
    port: info.ports.ftp!,
    user: USER,
    stored: async (remote) => {
      const e = await api<{ md5: string | null; size: number | null }>(info, 'GET', `/files/${remote}`);
      return { md5: e.md5, size: e.size };
    },
  };

  // vsftpd: a local user whose home is in the work dir, TLS with the gateway's certificate.
  const home = path.join(work, 'vsftpd-home');
  const vdir = path.join(work, 'vsftpd');
  mkdirSync(home);
  mkdirSync(path.join(vdir, 'empty'), { recursive: true });
  const { uid, gid } = systemUser(SYS_USER, home, PASSWORD);
  mkdirSync(path.join(home, 'big'));
  for (let i = 0; i < LIST_ENTRIES; i++)
    writeFileSync(path.join(home, 'big', `f${String(i).padStart(7, '0')}.bin`), '');
  chownSync(home, uid, gid);
  const vport = await freePort();
  const tls = path.join(info.dataDir, 'tls');
  const conf = path.join(vdir, 'vsftpd.conf');
  writeFileSync(
    conf,
    [
      'listen=YES',
      'listen_ipv6=NO',
      'listen_address=127.0.0.1',
      `listen_port=${vport}`,
      'background=NO',
      'anonymous_enable=NO',
      'local_enable=YES',
      'write_enable=YES',
      'local_umask=022',
      'pasv_enable=YES',
      `pasv_min_port=${base + 100}`,
      `pasv_max_port=${base + 199}`,
      // Containers often refuse the namespaces and seccomp filters vsftpd would set up.
      'seccomp_sandbox=NO',
      'isolate=NO',
      'isolate_network=NO',
      'xferlog_enable=NO',
      `vsftpd_log_file=${path.join(vdir, 'vsftpd.log')}`,
      `secure_chroot_dir=${path.join(vdir, 'empty')}`,
      'pam_service_name=vsftpd',
      'ssl_enable=YES',
      `rsa_cert_file=${path.join(tls, 'cert.pem')}`,
      `rsa_private_key_file=${path.join(tls, 'key.pem')}`,
      'force_local_logins_ssl=NO',
      'force_local_data_ssl=NO',
      // As the gateway's ftp.require_session_reuse (default on).
      'require_ssl_reuse=YES',
      'ssl_ciphers=HIGH',
      '',
    ].join('\n'),
  );
  const vsftpd: ChildProcess = spawn('/usr/sbin/vsftpd', [conf], { stdio: ['ignore', 'inherit', 'inherit'] });
  cleanups.push(() => stopChild(vsftpd));
  await waitForPort(vport, vsftpd, 'vsftpd');
  console.log(`vsftpd pid ${vsftpd.pid} on :${vport}, passive ${base + 100}-${base + 199}, user ${SYS_USER}`);
  const peer: Server = {
    name: 'vsftpd',
    port: vport,
    user: SYS_USER,
    stored: async (remote) => {
      const file = path.join(home, remote);
      return { md5: await md5File(file), size: statSync(file).size };
    },
  };
  const servers = [gateway, peer];

  // 1 GiB STOR and RETR, plain and TLS; the gateway's RSS sampled during its own transfers.
  const rss = new RssSampler(info.pid);
  const idle = rss.idle;
  const cpu = new CpuMeter(info.pid);
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
      for (const s of servers) {
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
        peer: `vsftpd: ${f0(mbps(FILE_BYTES, v.s))}`,
        ratio: f2(v.s / g.s),
      });
    }
  }
  rows.push({
    metric: `gateway max RSS during the ${SIZE_LABEL} transfers, MiB (idle before: ${f0(idle)})`,
    value: f0(rss.max),
    peer: `limit ${RSS_LIMIT_MIB}`,
    ratio: f2(rss.max / RSS_LIMIT_MIB),
  });

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
  for (const [dir, gs, vs] of [
    ['up (`mirror -R`)', g.up, v.up],
    ['down (`mirror`)', g.down, v.down],
  ] as const) {
    rows.push({
      metric: `${SMALL_FILES} × 4 KiB ${dir}, lftp plain, best of ${RUNS}, files/s`,
      value: f0(SMALL_FILES / gs),
      peer: `vsftpd: ${f0(SMALL_FILES / vs)}`,
      ratio: f2(vs / gs),
    });
  }

  // Listings of a 10,000-entry folder with curl (login included). vsftpd has no MLSD: its LIST is the peer.
  const list = async (s: Server, command: 'MLSD' | 'LIST'): Promise<number> =>
    best(LIST_RUNS, async () => {
      const t1 = performance.now();
      const r = await must([
        'curl',
        '-sS',
        '-u',
        `${s.user}:${PASSWORD}`,
        ...(command === 'MLSD' ? ['-X', 'MLSD'] : []),
        `ftp://127.0.0.1:${s.port}/big/`,
      ]);
      const took = seconds(t1) * 1000;
      const n = r.stdout.split('\n').filter((l) => l.includes('f0')).length;
      if (n !== LIST_ENTRIES) throw new Error(`${s.name} ${command} listed ${n} entries`);
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
} finally {
  await runCleanups();
}

const text = table(
  'FTP benchmark',
  [
    `Gateway (test/bench/serve.ts, SQLite, local blob store) and vsftpd (Debian, own config, a local user) on loopback, ` +
      `side by side in one run, each transfer ${RUNS}× interleaved, best kept. MB/s = 10^6 bytes/s; ratio = ` +
      `gateway/vsftpd throughput (time ratio for listings: lower is better). RSS = VmRSS sampled every 100 ms, MiB. ` +
      `Client: lftp ${/Version (\S+)/.exec((await run(['lftp', '--version'])).stdout)?.[1] ?? ''}; vsftpd with require_ssl_reuse=YES, ` +
      `as the gateway's ftp.require_session_reuse. The gateway fsyncs every upload before committing it; vsftpd does not.`,
  ],
  rows,
  started,
);
console.log(`\n${text}\n`);
writeFileSync(path.join('test', 'bench', 'results-ftp.md'), `${text}\n`);
