/**
 * Stopping with a drain (issue 12, item 1), on the gateway as its own process and real clients:
 * on SIGTERM every listener stops accepting and idle sessions are closed at once (FTP `421`, an SSH
 * disconnect); running transfers (an OpenSSH sftp put, lftp FTP and WebDAV downloads, slowed by
 * their rate limits) finish within `shutdown.grace_seconds` and are whole; one longer than the grace is cut, its
 * bytes kept for its uploader to resume (everyone else keeps the old content), and the process
 * exits soon after the grace.
 * The database plays no part here: SQLite only.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { serveProcess, stopProcess, type ServedProcess } from '../helpers/process.ts';
import { md5, RawControl } from './ftp/clients.ts';
import { authArgs, SSH_OPTIONS } from './sftp/clients.ts';

const ADMIN = 'drainadmin';
const PASSWORD = 'drain-password-1';
/** allowance for a busy machine on top of the grace; not a speed figure */
const MARGIN_MS = 10_000;

/** Exited is how a client process ended, with what it printed on stderr. */
interface Exited {
  code: number | null;
  stderr: string;
}

/** start runs a client process; `exited` resolves when it ends. */
function start(argv: string[]): { child: ChildProcess; exited: Promise<Exited> } {
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<Exited>((resolve) => child.once('exit', (code) => resolve({ code, stderr })));
  return { child, exited };
}

/**
 * sftpPut uploads `local` to `remote` with OpenSSH sftp, at most `kbits` kbit/s (0: no limit);
 * `verb` reput resumes a cut upload.
 */
function sftpPut(port: number, local: string, remote: string, kbits = 0, verb: 'put' | 'reput' = 'put') {
  const { prefix, args } = authArgs({ password: PASSWORD });
  const batch = path.join(path.dirname(local), `${path.basename(local)}.batch`);
  writeFileSync(batch, `${verb} ${local} ${remote}\n`);
  const limit = kbits ? ['-l', String(kbits)] : [];
  return start([
    ...prefix,
    'sftp',
    ...args,
    ...SSH_OPTIONS,
    ...limit,
    '-b',
    batch,
    '-P',
    String(port),
    `${ADMIN}@127.0.0.1`,
  ]);
}

/**
 * idleSftp logs in with OpenSSH sftp and stays idle, reading commands from a pipe; `output` is
 * what it printed (INFO, so that it shows the server's disconnect).
 */
async function idleSftp(port: number) {
  const { prefix, args } = authArgs({ password: PASSWORD });
  const argv = [...prefix, 'sftp', ...args, '-o', 'LogLevel=INFO', ...SSH_OPTIONS];
  argv.push('-b', '-', '-P', String(port), `${ADMIN}@127.0.0.1`);
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
  const client = { output: '' };
  for (const s of [child.stdout!, child.stderr!])
    s.on('data', (c: Buffer) => (client.output += c.toString()));
  child.stdin!.write('pwd\n');
  await until(
    () => `the idle sftp logged in: ${client.output}`,
    () => /Remote working directory/.test(client.output),
  );
  return { client, child };
}

/**
 * lftpGet downloads `url` (ftp://… or https://…, the file's own URL) with lftp at `bytesPerSecond`,
 * trying once: a download the drain broke fails instead of being fetched again. Not curl: its
 * --limit-rate (7.88) let 1.5 MB through in under a second on loopback, so the download it was
 * meant to keep running had ended before SIGTERM's effects could be seen.
 */
function lftpGet(url: string, local: string, bytesPerSecond: number) {
  const settings = [
    'set cmd:fail-exit yes',
    'set net:max-retries 1',
    'set net:timeout 30',
    'set ssl:verify-certificate no',
    `set net:limit-rate ${bytesPerSecond}`,
  ];
  return start(['lftp', '-c', [...settings, `get ${url} -o ${local}`].join('; ')]);
}

/** curlFtp downloads (or with `upload`, uploads) a site path over plain FTP. */
function curlFtp(
  port: number,
  remote: string,
  local: string,
  opts: { upload?: boolean; user?: string } = {},
) {
  return start([
    'curl',
    '-sS',
    '--max-time',
    '120',
    '-u',
    `${opts.user ?? ADMIN}:${PASSWORD}`,
    ...(opts.upload ? ['-T', local] : ['-o', local]),
    `ftp://127.0.0.1:${port}/${remote}`,
  ]);
}

/** until polls `cond` every 50 ms until it holds (or fails after 30 s). */
async function until(what: string | (() => string), cond: () => boolean): Promise<void> {
  const end = Date.now() + 30_000;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting: ${typeof what === 'string' ? what : what()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** staged tells whether an upload has bytes in the gateway's staging folder (it is running). */
function staged(dataDir: string): boolean {
  const walk = (dir: string): boolean => {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return false;
    }
    return names.some((n) => {
      const p = path.join(dir, n);
      const st = statSync(p, { throwIfNoEntry: false });
      return st ? (st.isDirectory() ? walk(p) : st.size > 0) : false;
    });
  };
  return walk(path.join(dataDir, 'staging'));
}

/** sizeOf is a local file's size, 0 while it does not exist. */
function sizeOf(file: string): number {
  return statSync(file, { throwIfNoEntry: false })?.size ?? 0;
}

/** refused tells whether a TCP connection to the port is refused. */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1' });
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}

/** exitOf resolves with the process's exit code once it has exited. */
function exitOf(p: ServedProcess): Promise<number | null> {
  if (p.child.exitCode !== null) return Promise.resolve(p.child.exitCode);
  return new Promise((resolve) => p.child.once('exit', (code) => resolve(code)));
}

describe('stopping with a drain (SIGTERM)', function () {
  this.timeout(90_000);
  let dir: string;
  let dataDir: string;
  let gw: ServedProcess | null = null;

  const serve = async (graceSeconds: number) => {
    gw = await serveProcess(dataDir, {
      SVC_ADMIN_USERNAME: ADMIN,
      SVC_ADMIN_PASSWORD: PASSWORD,
      SVC_SHUTDOWN_GRACE_SECONDS: String(graceSeconds),
    });
    return gw;
  };

  /** fetch downloads a site path whole (as `user`) through a gateway that is not stopping. */
  const fetch = async (p: ServedProcess, remote: string, user = ADMIN): Promise<Buffer> => {
    const local = path.join(dir, `fetched-${randomBytes(4).toString('hex')}`);
    const r = await curlFtp(p.ports.ftp!, remote, local, { user }).exited;
    expect(r.code, r.stderr).to.equal(0);
    return readFileSync(local);
  };

  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-drain-'));
    dataDir = path.join(dir, 'data');
  });
  afterEach(async () => {
    if (gw) await stopProcess(gw);
    gw = null;
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('lets a running SFTP upload and FTP and WebDAV downloads finish, closes idle FTP (421) and SFTP (disconnect) sessions at once and refuses new connections', async () => {
    const p = await serve(30);
    const download = randomBytes(1_500_000);
    const upload = randomBytes(1_500_000);
    writeFileSync(path.join(dir, 'down.bin'), download);
    writeFileSync(path.join(dir, 'up.bin'), upload);
    const seed = await curlFtp(p.ports.ftp!, 'down.bin', path.join(dir, 'down.bin'), { upload: true }).exited;
    expect(seed.code, seed.stderr).to.equal(0);

    const idle = await RawControl.connect(p.ports.ftp!);
    expect(await idle.login(ADMIN, PASSWORD)).to.match(/^230/);
    const idleSsh = await idleSftp(p.ports.sftp!);
    // About 5 s each at these rates: long enough to be running when SIGTERM arrives.
    const put = sftpPut(p.ports.sftp!, path.join(dir, 'up.bin'), 'up.bin', 2400);
    const got = path.join(dir, 'got.bin');
    const get = lftpGet(`ftp://${ADMIN}:${PASSWORD}@127.0.0.1:${p.ports.ftp!}/down.bin`, got, 300_000);
    const davGot = path.join(dir, 'dav-got.bin');
    const davGet = lftpGet(
      `https://${ADMIN}:${PASSWORD}@127.0.0.1:${p.ports.webdav!}/down.bin`,
      davGot,
      300_000,
    );
    await until('the SFTP upload is running', () => staged(dataDir));
    await until('the FTP download is running', () => sizeOf(got) > 0);
    await until('the WebDAV download is running', () => sizeOf(davGot) > 0);

    const exit = exitOf(p);
    p.child.kill('SIGTERM');
    let getDone = false;
    let davDone = false;
    void get.exited.then(() => (getDone = true));
    void davGet.exited.then(() => (davDone = true));
    expect(await idle.reply(), 'the idle FTP session').to.match(/^421/);
    // sftp itself notices only at its next command; its ssh prints the disconnect at once.
    await until(
      () => `the idle SFTP session's disconnect: ${idleSsh.client.output}`,
      () => /Received disconnect .*Server shutting down/.test(idleSsh.client.output),
    );
    idleSsh.child.stdin!.end();
    expect(getDone, 'the FTP download was still running when the idle sessions were closed').to.equal(false);
    expect(davDone, 'the WebDAV download was still running when the idle sessions were closed').to.equal(
      false,
    );
    for (const port of [p.ports.ftp!, p.ports.sftp!, p.ports.https!, p.ports.webdav!])
      expect(await refused(port), `a new connection to port ${port}`).to.equal(true);

    const [putEnd, getEnd, davEnd] = await Promise.all([put.exited, get.exited, davGet.exited]);
    expect(putEnd.code, putEnd.stderr).to.equal(0);
    expect(getEnd.code, getEnd.stderr).to.equal(0);
    expect(md5(readFileSync(got))).to.equal(md5(download));
    expect(davEnd.code, davEnd.stderr).to.equal(0);
    expect(md5(readFileSync(davGot)), 'the WebDAV download').to.equal(md5(download));
    expect(await exit).to.equal(0);
    idle.close();

    // The upload was committed whole.
    const again = await serve(30);
    expect(md5(await fetch(again, 'up.bin'))).to.equal(md5(upload));
  });

  it('cuts an SFTP upload longer than the grace: others keep the old content, its uploader can resume it, and the process exits soon after the grace', async () => {
    const grace = 2;
    const p = await serve(grace);
    const old = randomBytes(10_000);
    const big = randomBytes(3_000_000);
    writeFileSync(path.join(dir, 'old.bin'), old);
    writeFileSync(path.join(dir, 'big.bin'), big);
    const seed = await curlFtp(p.ports.ftp!, 'keep.bin', path.join(dir, 'old.bin'), { upload: true }).exited;
    expect(seed.code, seed.stderr).to.equal(0);

    // About 20 s at this rate, far longer than the grace.
    const put = sftpPut(p.ports.sftp!, path.join(dir, 'big.bin'), 'keep.bin', 1200);
    await until('the SFTP upload is running', () => staged(dataDir));
    const exit = exitOf(p);
    const sent = Date.now();
    p.child.kill('SIGTERM');
    const exitedWithin = await Promise.race([
      exit.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), grace * 1000 + MARGIN_MS).unref()),
    ]);
    expect(exitedWithin, `exited within the grace + ${MARGIN_MS / 1000} s`).to.equal(true);
    expect(await exit).to.equal(0);
    expect(Date.now() - sent, 'the upload ran until the grace was over').to.be.at.least(grace * 1000 - 200);
    const putEnd = await put.exited;
    expect(putEnd.code, 'sftp reports the cut upload').to.not.equal(0);

    // Another user sees the old content; to the uploader the path reports what arrived (a pending
    // version), and OpenSSH `reput` completes it.
    const other = spawnSync(
      process.execPath,
      [
        'bin/svc-gateway.js',
        'users',
        'create',
        '--username',
        'other',
        '--password',
        PASSWORD,
        '--site-admin',
      ],
      { env: { ...process.env, SVC_DATA_DIR: dataDir }, encoding: 'utf8' },
    );
    expect(other.status, other.stderr).to.equal(0);
    const again = await serve(30);
    expect(md5(await fetch(again, 'keep.bin', 'other'))).to.equal(md5(old));
    const control = await RawControl.connect(again.ports.ftp!);
    expect(await control.login(ADMIN, PASSWORD)).to.match(/^230/);
    const size = Number(/^213 (\d+)/.exec(await control.send('SIZE keep.bin'))?.[1]);
    control.close();
    expect(size, 'the bytes kept for a resume').to.be.above(0).and.below(big.length);
    const reput = await sftpPut(again.ports.sftp!, path.join(dir, 'big.bin'), 'keep.bin', 0, 'reput').exited;
    expect(reput.code, reput.stderr).to.equal(0);
    expect(md5(await fetch(again, 'keep.bin', 'other'))).to.equal(md5(big));
  });
});
