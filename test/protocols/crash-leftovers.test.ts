/**
 * Issue 12 "Nothing left behind": a gateway process killed with SIGKILL in the middle of uploads on
 * every protocol (a REST part, an FTP STOR, an SFTP put, a WebDAV PUT, each sent by curl at a
 * limited rate) leaves partial blobs, staging files and blobs recorded as garbage with its leases.
 * The next start sweeps them all before it says ready: no partial, no staging file, no garbage
 * mark, no lease, and no blob on disk that no row refers to.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { loadConfig } from '../../src/config.ts';
import { createCore, type Core } from '../../src/core/index.ts';
import { SPARES } from '../../src/core/files/spares.ts';
import {
  BlobGarbageEntity,
  BlobLeaseEntity,
  FileEntity,
  UploadEntity,
  UploadPartEntity,
} from '../../src/db/entities.ts';
import { createLogger } from '../../src/log.ts';
import { freshDatabase } from '../helpers/database.ts';
import { dbKind, TEST_DATABASE_URL } from '../helpers/gateway.ts';
import { dbOf } from '../helpers/internals.ts';
import { serveProcess, stopProcess, type ServedProcess } from '../helpers/process.ts';
import { authArgs, SSH_OPTIONS } from './sftp/clients.ts';

const PASSWORD = 'admin-password-12';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** filesUnder lists the files under `dir` (recursively) whose names end with `suffix`. */
function filesUnder(dir: string, suffix: string): string[] {
  try {
    return (readdirSync(dir, { recursive: true }) as string[]).filter((n) => n.endsWith(suffix));
  } catch {
    return [];
  }
}

function post(port: number, ca: Buffer, urlPath: string, headers: Record<string, string>, body: unknown) {
  const payload = Buffer.from(JSON.stringify(body));
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return new Promise<{ status: number; json: any }>((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: urlPath,
        ca,
        servername: 'localhost',
        headers: { 'Content-Type': 'application/json', 'Content-Length': String(payload.length), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            json: JSON.parse(Buffer.concat(chunks).toString() || 'null'),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

describe(`kill -9 during uploads on every protocol, then restart (${dbKind})`, function () {
  this.timeout(180_000);
  let dir: string;
  let source: string;
  let dbUrl = '';
  let dropDb: (() => Promise<void>) | null = null;
  const clients: ChildProcess[] = [];
  let served: ServedProcess | null = null;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-crash-'));
    source = path.join(dir, 'source.bin');
    writeFileSync(source, Buffer.alloc(16 * 1024 * 1024, 7));
    if (TEST_DATABASE_URL) {
      const db = await freshDatabase(TEST_DATABASE_URL, 'svc_crash');
      dbUrl = db.url;
      dropDb = db.drop;
    }
  });
  after(async () => {
    for (const c of clients) if (c.exitCode === null) c.kill('SIGKILL');
    if (served) await stopProcess(served);
    await dropDb?.();
    rmSync(dir, { recursive: true, force: true });
  });

  const data = () => path.join(dir, 'data');
  const env = () => ({
    SVC_ADMIN_USERNAME: 'admin',
    SVC_ADMIN_PASSWORD: PASSWORD,
    SVC_LOG_LEVEL: 'info',
    ...(dbUrl ? { SVC_DATABASE_URL: dbUrl } : {}),
  });
  const curl = (args: string[]) => {
    // 200 KiB/s: each upload is still running when the gateway is killed.
    const c = spawn('curl', ['-sS', '-k', '--limit-rate', '200k', ...args], { stdio: 'ignore' });
    clients.push(c);
    return c;
  };

  it('leaves no partial, staging file, garbage mark, lease or unreferenced blob after the restart', async () => {
    const first = await serveProcess(data(), env());
    served = first;
    const ca = readFileSync(path.join(data(), 'tls', 'cert.pem'));
    const { ports } = first;
    const session = await post(
      ports.https!,
      ca,
      '/api/rest/v1/sessions',
      {},
      { username: 'admin', password: PASSWORD },
    );
    expect(session.status).to.equal(200);
    const auth = { 'X-SvcAPI-Auth': session.json.id as string };
    // A small file first: the blob store then keeps SPARES empty files made ahead (spares.ts).
    const url = `https://127.0.0.1:${ports.webdav}/small.txt`;
    const small = spawnSync('curl', ['-sSkT', '-', '-u', `admin:${PASSWORD}`, '-w', '%{http_code}', url], {
      input: 'small',
      encoding: 'utf8',
    });
    expect(small.stdout, `small upload: ${small.stderr}`).to.equal('201');
    const upload = await post(ports.https!, ca, '/api/rest/v1/files/rest.bin', auth, { action: 'put' });
    expect(upload.status).to.equal(200);

    curl(['-X', 'PUT', '--data-binary', `@${source}`, upload.json.upload_uri as string]);
    curl(['-T', source, `ftp://admin:${PASSWORD}@127.0.0.1:${ports.ftp}/ftp.bin`]);
    curl(['-T', source, '-u', `admin:${PASSWORD}`, `https://127.0.0.1:${ports.webdav}/dav.bin`]);
    // OpenSSH sftp (curl's libssh2 1.10 shares no key exchange with the gateway), at 200 KiB/s too.
    const sftp = spawn(
      'sshpass',
      [
        '-p',
        PASSWORD,
        'sftp',
        '-P',
        String(ports.sftp),
        '-l',
        '1600',
        ...SSH_OPTIONS,
        ...authArgs({ password: PASSWORD }).args,
        '-b',
        '-',
        'admin@127.0.0.1',
      ],
      { stdio: ['pipe', 'ignore', 'ignore'] },
    );
    clients.push(sftp);
    sftp.stdin!.end(`put ${source} /sftp.bin\n`);

    // Every upload is under way: three puts into partial blobs (REST part, FTP, WebDAV), one
    // staged SFTP write, and the blobs recorded as garbage held by the process's leases.
    const blobs = path.join(data(), 'blobs');
    const staging = path.join(data(), 'staging');
    const spare = path.join(blobs, 'spare');
    const partials = () => filesUnder(blobs, '.partial').filter((f) => !f.startsWith('spare/'));
    for (let i = 0; partials().length < 3 || filesUnder(staging, '.part').length < 1; i++) {
      if (i > 300) throw new Error(`uploads did not start: ${partials()} ${filesUnder(staging, '.part')}`);
      await sleep(100);
    }
    await sleep(1000);
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));
    served = null;
    for (const c of clients) if (c.exitCode === null) c.kill('SIGKILL');
    expect(partials(), 'partials the kill left').to.have.length.of.at.least(3);
    expect(filesUnder(spare, '.partial'), 'files made ahead for small blobs').to.have.length(SPARES);
    // The SFTP upload's staging file, and those made ahead for the next uploads (spares.ts).
    expect(filesUnder(staging, '.part'), 'staging files the kill left').to.have.length.of.at.least(
      1 + SPARES,
    );

    // The restart sweeps before it says ready.
    served = await serveProcess(data(), env());
    expect(filesUnder(blobs, '.partial'), 'partials after the restart').to.deep.equal([]);
    expect(filesUnder(staging, '.part'), 'staging files after the restart').to.deep.equal([]);
    const config = loadConfig({ SVC_DATA_DIR: data(), ...(dbUrl ? { SVC_DATABASE_URL: dbUrl } : {}) });
    const core: Core = await createCore(config, createLogger('error', { silent: true }), {
      migrate: false,
      background: false,
    });
    try {
      const db = dbOf(core);
      const [garbage, leases, rows, parts, uploads] = await db.read(async (em) => [
        await em.find(BlobGarbageEntity),
        await em.find(BlobLeaseEntity),
        await em.find(FileEntity),
        await em.find(UploadPartEntity),
        await em.find(UploadEntity),
      ]);
      expect(garbage, 'blobs recorded as garbage').to.deep.equal([]);
      expect(leases, 'leases').to.deep.equal([]);
      const referenced = new Set(
        [
          ...rows.map((r) => r.blob_id),
          ...parts.map((p) => p.blob_id),
          ...uploads.flatMap((u) => [u.blob_id, u.restart_blob_id]),
        ].filter(Boolean),
      );
      const onDisk = filesUnder(blobs, '').filter((n) => /^[0-9a-f]{2}\/[0-9a-f]+$/.test(n));
      expect(
        onDisk.filter((n) => !referenced.has(path.basename(n))),
        'blobs no row refers to',
      ).to.deep.equal([]);
      // None of the interrupted uploads became a file.
      expect(rows.map((r) => r.path).filter((p) => p.endsWith('.bin'))).to.deep.equal([]);
    } finally {
      await core.close();
    }
    expect(await stopProcess(served)).to.equal(0);
    served = null;
  });
});
