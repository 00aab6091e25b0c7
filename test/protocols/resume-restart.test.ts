/**
 * Issue 20, "anywhere": a pending version lives in the database and the blob store, not in a
 * process. An lftp upload killed mid-way, then the gateway itself killed with SIGKILL and started
 * again: `put -c` on the new process sends only the rest. On PostgreSQL, two gateway processes on
 * one database and data dir: cut on one, resumed with OpenSSH `reput` on the other.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { freshDatabase } from '../helpers/database.ts';
import { dbKind, TEST_DATABASE_URL } from '../helpers/gateway.ts';
import { serveProcess, stopProcess, type ServedProcess } from '../helpers/process.ts';
import { sftpBatch } from './sftp/clients.ts';

const PASSWORD = 'admin-password-12';
const SIZE = 16 * 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

function run(argv: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: Buffer.concat(out).toString('latin1'), stderr });
    });
  });
}

describe(`a pending version outlives its process (${dbKind})`, function () {
  this.timeout(240_000);
  let dir: string;
  let source: string;
  let data: Buffer;
  let dbUrl = '';
  let dropDb: (() => Promise<void>) | null = null;
  const served: ServedProcess[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-resume-restart-'));
    source = path.join(dir, 'source.bin');
    data = Buffer.alloc(SIZE);
    for (let i = 0; i < SIZE; i += 4) data.writeUInt32LE(Math.imul(i, 2246822519) >>> 0, i);
    writeFileSync(source, data);
    if (TEST_DATABASE_URL) {
      const db = await freshDatabase(TEST_DATABASE_URL, 'svc_resume');
      dbUrl = db.url;
      dropDb = db.drop;
    }
  });
  after(async () => {
    for (const s of served) if (s.child.exitCode === null) s.child.kill('SIGKILL');
    await dropDb?.();
    rmSync(dir, { recursive: true, force: true });
  });

  const dataDir = () => path.join(dir, 'data');
  const env = (pasv: string) => ({
    SVC_ADMIN_USERNAME: 'admin',
    SVC_ADMIN_PASSWORD: PASSWORD,
    SVC_FTP_PASV_PORTS: pasv,
    ...(dbUrl ? { SVC_DATABASE_URL: dbUrl } : {}),
  });
  const serve = async (pasv = '23120-23129') => {
    const s = await serveProcess(dataDir(), env(pasv));
    served.push(s);
    return s;
  };
  const kill9 = async (s: ServedProcess) => {
    s.child.kill('SIGKILL');
    if (s.child.exitCode === null) await new Promise((r) => s.child.once('exit', r));
  };
  const lftp = (s: ServedProcess, script: string, extra = '') => [
    'lftp',
    '-c',
    [
      'set cmd:fail-exit yes',
      'set net:max-retries 1',
      'set ftp:passive-mode yes',
      'set ftp:ssl-allow no',
      extra,
      `open -u admin,${PASSWORD} ftp://127.0.0.1:${s.ports.ftp}`,
      script,
    ].join('; '),
  ];
  /** ftpSize is what SIZE answers the admin (curl asks SIZE for -I), or null. */
  const ftpSize = async (s: ServedProcess, name: string) => {
    const r = await run(['curl', '-sS', '-I', `ftp://admin:${PASSWORD}@127.0.0.1:${s.ports.ftp}/${name}`]);
    const m = /Content-Length: (\d+)/.exec(r.stdout);
    return m ? Number(m[1]) : null;
  };
  const download = async (s: ServedProcess, name: string) =>
    Buffer.from(
      (await run(['curl', '-sS', `ftp://admin:${PASSWORD}@127.0.0.1:${s.ports.ftp}/${name}`])).stdout,
      'latin1',
    );
  /** cut starts a throttled lftp put, kills it with SIGKILL after 2.5 s and waits for the pending size. */
  const cut = async (s: ServedProcess, name: string) => {
    const [program, ...args] = lftp(s, `put ${source} -o ${name}`, 'set net:limit-rate 2M');
    const client = spawn(program!, args, { stdio: 'ignore', detached: true });
    await sleep(2500);
    process.kill(-client.pid!, 'SIGKILL');
    for (let i = 0; i < 100; i++) {
      const size = await ftpSize(s, name);
      if (size !== null && size > 0) return size;
      await sleep(100);
    }
    throw new Error('no pending size after the cut');
  };

  it('survives SIGKILL of the gateway and a restart: put -c on the new process sends the rest', async () => {
    const first = await serve();
    const pending = await cut(first, 'restart.bin');
    expect(pending).to.be.greaterThan(0).and.lessThan(SIZE);
    await kill9(first);
    const second = await serve();
    expect(await ftpSize(second, 'restart.bin')).to.equal(pending);
    const resumed = await run(['lftp', '-d', ...lftp(second, `put -c ${source} -o restart.bin`).slice(1)]);
    expect(resumed.code, resumed.stderr.slice(-2000)).to.equal(0);
    expect(resumed.stderr).to.include(`REST ${pending}`);
    expect(md5(await download(second, 'restart.bin'))).to.equal(md5(data));
    await stopProcess(second);
  });

  (dbKind === 'postgres' ? it : it.skip)(
    'two instances on one database: cut on one, OpenSSH reput on the other (postgres)',
    async () => {
      const a = await serve('23130-23139');
      const b = await serve('23140-23149');
      const pending = await cut(a, 'two.bin');
      expect(await ftpSize(b, 'two.bin')).to.equal(pending);
      const resumed = await sftpBatch(b.ports.sftp!, 'admin', { password: PASSWORD }, [
        `reput ${source} /two.bin`,
      ]);
      expect(resumed.code, resumed.stderr).to.equal(0);
      expect(md5(await download(a, 'two.bin'))).to.equal(md5(data));
      await stopProcess(a);
      await stopProcess(b);
    },
  );
});
