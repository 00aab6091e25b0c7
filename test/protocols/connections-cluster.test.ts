/**
 * Live connections across instances (issue 15, item 4) with two real gateway processes
 * (`svc-gateway serve`) on one PostgreSQL database: a user's OpenSSH sftp session on gateway B,
 * uploading at a throttled rate, is listed by gateway A's GET /connections with its protocol, user,
 * address and bytes so far; DELETE on A ends the session on B (the client sees the connection
 * closed); and after B is killed with SIGKILL, its rows leave A's list once they expire.
 *
 * PostgreSQL only: two instances need one shared database, which SQLite is not.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { freshDatabase, type FreshDatabase } from '../helpers/database.ts';
import { dbKind, TEST_DATABASE_URL } from '../helpers/gateway.ts';
import { serveProcess, stopProcess, type ServedProcess } from '../helpers/process.ts';
import { openSftp, sftpClosed, type OpenSftp } from '../helpers/open-sftp.ts';

const API = '/api/rest/v1';
const ADMIN_PASSWORD = 'connections-admin-1';
const PASSWORD = 'connections-user-1';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Listed {
  id: number;
  instance: string;
  interface: string;
  username: string;
  ip: string;
  transfer_path: string | null;
  transfer_direction: string | null;
  transfer_bytes: number;
}

/** call sends one request to a gateway's REST API (its own self-signed certificate). */
function call(
  port: number,
  method: string,
  urlPath: string,
  opts: { session?: string; body?: unknown } = {},
): Promise<{ status: number; json: unknown; text: string }> {
  const payload = opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body));
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path: `${API}${urlPath}`,
        rejectUnauthorized: false,
        headers: {
          Accept: 'application/json',
          ...(opts.session ? { 'X-SvcAPI-Auth': opts.session } : {}),
          ...(payload
            ? { 'Content-Type': 'application/json', 'Content-Length': String(payload.length) }
            : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown = null;
          try {
            json = JSON.parse(text);
          } catch {
            // not JSON: the text tells
          }
          resolve({ status: res.statusCode ?? 0, json, text });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

(dbKind === 'postgres' ? describe : describe.skip)(
  'live connections across two gateway processes (PostgreSQL only: they share one database)',
  function () {
    this.timeout(150_000);
    let work: string;
    let db: FreshDatabase;
    let a: ServedProcess;
    let b: ServedProcess;
    let session: string;
    let username: string;
    const clients: OpenSftp[] = [];

    const list = async (): Promise<Listed[]> => {
      const r = await call(a.ports.https!, 'GET', '/connections', { session });
      expect(r.status, r.text).to.equal(200);
      return r.json as Listed[];
    };
    /** until polls A's list (bounded) until `found` holds; returns the last list. */
    const until = async (found: (rows: Listed[]) => boolean, tries = 100): Promise<Listed[]> => {
      let rows = await list();
      for (let i = 0; i < tries && !found(rows); i++) {
        await sleep(500);
        rows = await list();
      }
      return rows;
    };

    before(async function () {
      this.timeout(120_000);
      work = mkdtempSync(path.join(os.tmpdir(), 'svc-connections-'));
      db = await freshDatabase(TEST_DATABASE_URL, 'svc_connections');
      const env = {
        SVC_DATABASE_URL: db.url,
        SVC_SECRET: randomBytes(24).toString('base64url'),
        SVC_ADMIN_USERNAME: 'admin',
        SVC_ADMIN_PASSWORD: ADMIN_PASSWORD,
        SVC_FTP_PORT: 'off',
        SVC_FTPS_PORT: 'off',
        SVC_WEBDAV_PORT: 'off',
      };
      for (const name of ['a', 'b']) mkdirSync(path.join(work, name));
      // One after the other: the first migrates the database.
      a = await serveProcess(path.join(work, 'a'), env);
      b = await serveProcess(path.join(work, 'b'), env);
      const r = await call(a.ports.https!, 'POST', '/sessions', {
        body: { username: 'admin', password: ADMIN_PASSWORD },
      });
      expect(r.status, r.text).to.equal(200);
      session = (r.json as { id: string }).id;
      username = `remote${randomBytes(3).toString('hex')}`;
      const u = await call(a.ports.https!, 'POST', '/users', {
        session,
        body: { username, password: PASSWORD, user_root: '', grant_permission: 'full' },
      });
      expect(u.status, u.text).to.equal(201);
      // 8 MB at 800 kbit/s: the upload lasts far longer than the test needs it.
      writeFileSync(path.join(work, 'big.bin'), randomBytes(8 * 1024 * 1024));
    });

    after(async () => {
      for (const c of clients) if (c.child.exitCode === null) c.child.kill('SIGKILL');
      for (const s of [a, b])
        if (s && s.child.exitCode === null && s.child.signalCode === null) await stopProcess(s);
      await db?.drop();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it("lists an sftp upload on B in A's list, with its bytes, and ends it from A", async () => {
      const sftp = openSftp(b.ports.sftp!, username, PASSWORD, 800);
      clients.push(sftp);
      sftp.run(`put ${path.join(work, 'big.bin')} big.bin`);
      const rows = await until((all) => all.some((c) => c.username === username && c.transfer_bytes > 0));
      const row = rows.find((c) => c.username === username)!;
      expect(row, JSON.stringify(rows)).to.include({
        interface: 'sftp',
        ip: '127.0.0.1',
        transfer_path: '/big.bin',
        transfer_direction: 'upload',
      });
      expect(row.transfer_bytes)
        .to.be.above(0)
        .and.below(8 * 1024 * 1024);
      // Served by B: its process id is in the instance's name.
      expect(row.instance).to.include(`:${b.child.pid}:`);

      const r = await call(a.ports.https!, 'DELETE', `/connections/${row.id}`, { session });
      expect(r.status, r.text).to.equal(200);
      // B closes it at its next renewal: the client is disconnected with the reason.
      await sftpClosed(sftp);
      expect(sftp.stderr()).to.match(
        /Received disconnect from .*: Your connection was ended by an administrator/,
      );
      const after = await until((all) => !all.some((c) => c.id === row.id));
      expect(after.map((c) => c.id)).to.not.include(row.id);
    });

    it('drops the rows of B after B is killed with SIGKILL, once they expire', async () => {
      const sftp = openSftp(b.ports.sftp!, username, PASSWORD);
      clients.push(sftp);
      const rows = await until((all) => all.some((c) => c.username === username));
      const row = rows.find((c) => c.username === username)!;
      expect(row).to.include({ interface: 'sftp', transfer_path: null });
      b.child.kill('SIGKILL');
      await sftpClosed(sftp);
      // Nobody deleted the row (B died): it is left out once not renewed for the expiry (15 s).
      const after = await until((all) => !all.some((c) => c.id === row.id), 80);
      expect(after.map((c) => c.id)).to.not.include(row.id);
    });
  },
);
