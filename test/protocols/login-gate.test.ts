/**
 * One login gate and one credential cache for every front end (issue 11, item 4), seen through
 * real clients: curl for WebDAV and REST, lftp for FTP, OpenSSH sftp (through sshpass) for SFTP.
 * A change to a user (password, deletion, a flag, a lockout) applies at once on the instance that
 * made it, and within the cache time on a second gateway process on the same PostgreSQL database;
 * the `login` cadence of WebDAV clients is shared by both; and a database that stops answering is
 * a failure of the service in each protocol's terms, never a wrong password.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { operatorPrincipal, type Core } from '../../src/core/index.ts';
import { ActionEntity, UserEntity, type ActionRow } from '../../src/db/entities.ts';
import { freshDatabase } from '../helpers/database.ts';
import { dbKind, startTestGateway, TEST_DATABASE_URL, type TestGateway } from '../helpers/gateway.ts';
import { captureLogs } from '../helpers/logs.ts';
import { serveProcess, stopProcess, type ServedProcess } from '../helpers/process.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { lftp, run } from './ftp/clients.ts';
import { sftpBatch } from './sftp/clients.ts';
import { unique } from './rest/client.ts';
import { dbOf } from '../helpers/internals.ts';

const API = '/api/rest/v1';
const PASSWORD = 'first-password-1';
const NEW_PASSWORD = 'second-password-2';
// Default accounts.credential_cache_seconds, and what a change on another instance may take.
const CACHE_SECONDS = 5;
// The allowance for polling and a busy machine on top of the cache time; not a speed figure.
const MARGIN_MS = 5_000;

/** GatewayPorts are where one gateway (in this process or another) listens. */
interface GatewayPorts {
  https: number;
  webdav: number;
}

/** curl runs curl against a gateway's HTTPS listener and returns the status and body. */
async function curl(
  certFile: string,
  port: number,
  method: string,
  urlPath: string,
  opts: { user?: [string, string]; headers?: string[]; body?: string } = {},
): Promise<{ status: number; body: string }> {
  const args = ['-sS', '--max-time', '20', '--cacert', certFile, '-X', method, '-w', '\n%{http_code}'];
  if (opts.user) args.push('-u', `${opts.user[0]}:${opts.user[1]}`);
  for (const h of opts.headers ?? []) args.push('-H', h);
  if (opts.body !== undefined) args.push('--data-binary', opts.body);
  args.push(`https://localhost:${port}${urlPath}`);
  const r = await run('curl', args);
  const nl = r.stdout.lastIndexOf('\n');
  const status = Number(r.stdout.slice(nl + 1));
  if (!status) throw new Error(`curl failed: ${r.stderr}`);
  return { status, body: r.stdout.slice(0, nl) };
}

/** Client drives one gateway's WebDAV and REST listeners with curl. */
class Client {
  constructor(
    private readonly certFile: string,
    private readonly ports: GatewayPorts,
  ) {}

  /** propfind asks for the user's root (Depth 0) and returns the status. */
  async propfind(user: [string, string]): Promise<number> {
    const r = await curl(this.certFile, this.ports.webdav, 'PROPFIND', '/', { user, headers: ['Depth: 0'] });
    return r.status;
  }

  /** put uploads `body` to /name over WebDAV and returns the status. */
  async put(user: [string, string], name: string, body: string): Promise<number> {
    return (await curl(this.certFile, this.ports.webdav, 'PUT', `/${name}`, { user, body })).status;
  }

  /** session is POST /sessions over REST. */
  session(username: string, password: string): Promise<{ status: number; body: string }> {
    return curl(this.certFile, this.ports.https, 'POST', `${API}/sessions`, {
      headers: ['Content-Type: application/json'],
      body: JSON.stringify({ username, password }),
    });
  }
}

/** makeUser creates a user with full rights on an existing user_root home/<name>. */
async function makeUser(
  core: Core,
  fields: Record<string, unknown> = {},
): Promise<{ id: number; name: string }> {
  const op = operatorPrincipal();
  const name = unique('gate');
  await core.namespace.mkdir(op, `home/${name}`);
  const user = await core.users.create(op, {
    username: name,
    password: PASSWORD,
    user_root: `home/${name}/`,
    grant_permission: 'full',
    ...fields,
  });
  return { id: user.id, name };
}

function actionsOf(core: Core, username: string): Promise<ActionRow[]> {
  return dbOf(core).read((em) => em.find(ActionEntity, { where: { username }, order: { id: 'ASC' } }));
}

/** within polls `check` until it holds, and fails if it still does not after `ms`. */
async function within(ms: number, what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe(`the login gate: one gate and one credential cache for every front end (${dbKind})`, function () {
  this.timeout(120_000);
  let gw: TestGateway;
  let a: Client;
  const op = operatorPrincipal();

  before(async () => {
    gw = await startTestGateway({ ports: { webdav: 0 } });
    a = new Client(path.join(gw.config.data_dir, 'tls', 'cert.pem'), {
      https: gw.ports.https!,
      webdav: gw.ports.webdav!,
    });
  });
  after(async () => {
    await gw?.stop();
  });

  it('a password change applies at once on WebDAV: the old password is refused, the new one accepted', async () => {
    const u = await makeUser(gw.core);
    expect(await a.propfind([u.name, PASSWORD])).to.equal(207);
    await gw.core.users.update(op, u.id, { password: NEW_PASSWORD });
    expect(await a.propfind([u.name, PASSWORD])).to.equal(401);
    expect(await a.propfind([u.name, NEW_PASSWORD])).to.equal(207);
  });

  it('a locked-out user cannot PUT over WebDAV, though the client had logged in before', async () => {
    const u = await makeUser(gw.core);
    expect(await a.put([u.name, PASSWORD], 'a.txt', 'first')).to.equal(201);
    // Five wrong passwords (lockout.max_failures) through another front end lock the user.
    for (let i = 0; i < gw.config.lockout.max_failures; i++)
      expect((await a.session(u.name, 'wrong-password')).status).to.equal(401);
    expect(await a.put([u.name, PASSWORD], 'a.txt', 'second')).to.equal(401);
    const failed = (await actionsOf(gw.core, u.name)).filter((x) => x.action === 'failedlogin');
    expect(failed.map((x) => `${x.interface}:${x.failure_type}`)).to.include('dav:locked_out');
    const file = await gw.core.files.session(op).stat(`home/${u.name}/a.txt`);
    expect(file.size).to.equal('first'.length);
  });

  it('dav_permission=false refuses the next PROPFIND (401) with failure_type no_dav_permission', async () => {
    const u = await makeUser(gw.core);
    expect(await a.propfind([u.name, PASSWORD])).to.equal(207);
    await gw.core.users.update(op, u.id, { dav_permission: false });
    expect(await a.propfind([u.name, PASSWORD])).to.equal(401);
    const failed = (await actionsOf(gw.core, u.name)).filter((x) => x.action === 'failedlogin');
    expect(failed.map((x) => x.failure_type)).to.deep.equal(['no_dav_permission']);
  });

  it('allowed_ips set to another address refuses the next request at once', async () => {
    const u = await makeUser(gw.core);
    expect(await a.propfind([u.name, PASSWORD])).to.equal(207);
    await gw.core.users.update(op, u.id, { allowed_ips: '10.1.2.3' });
    expect(await a.propfind([u.name, PASSWORD])).to.equal(401);
  });

  it('a deleted user is refused on the next request', async () => {
    const u = await makeUser(gw.core);
    expect(await a.propfind([u.name, PASSWORD])).to.equal(207);
    await gw.core.users.remove(op, u.id);
    expect(await a.propfind([u.name, PASSWORD])).to.equal(401);
  });

  it('records one login for a WebDAV client, not one per request', async () => {
    const u = await makeUser(gw.core);
    for (let i = 0; i < 5; i++) expect(await a.propfind([u.name, PASSWORD])).to.equal(207);
    const logins = (await actionsOf(gw.core, u.name)).filter((x) => x.action === 'login');
    expect(logins.map((x) => x.interface)).to.deep.equal(['dav']);
  });
});

(dbKind === 'postgres' ? describe : describe.skip)(
  'the login gate across two gateway processes on one PostgreSQL database',
  function () {
    this.timeout(180_000);
    let gw: TestGateway;
    let other: ServedProcess;
    let otherDir: string;
    let a: Client;
    let b: Client;
    const op = operatorPrincipal();

    before(async () => {
      gw = await startTestGateway({ ports: { webdav: 0 } });
      otherDir = mkdtempSync(path.join(os.tmpdir(), 'svc-gate-'));
      other = await serveProcess(otherDir, {
        SVC_DATABASE_URL: gw.config.database.url,
        SVC_FTP_PORT: 'off',
        SVC_FTPS_PORT: 'off',
        SVC_SFTP_PORT: 'off',
      });
      a = new Client(path.join(gw.config.data_dir, 'tls', 'cert.pem'), {
        https: gw.ports.https!,
        webdav: gw.ports.webdav!,
      });
      b = new Client(path.join(otherDir, 'tls', 'cert.pem'), {
        https: other.ports.https!,
        webdav: other.ports.webdav!,
      });
    });
    after(async () => {
      if (other) await stopProcess(other);
      await gw?.stop();
      if (otherDir) rmSync(otherDir, { recursive: true, force: true });
    });

    it('a password change on one instance applies on the other within the cache time', async () => {
      const u = await makeUser(gw.core);
      expect(await b.propfind([u.name, PASSWORD])).to.equal(207);
      await gw.core.users.update(op, u.id, { password: NEW_PASSWORD });
      await within(
        CACHE_SECONDS * 1000 + MARGIN_MS,
        'old password refused on the other instance',
        async () => {
          const status = await b.propfind([u.name, PASSWORD]);
          expect(status).to.be.oneOf([207, 401]);
          return status === 401;
        },
      );
      expect(await b.propfind([u.name, NEW_PASSWORD])).to.equal(207);
    });

    it('a flag change, a lockout and a deletion on one instance apply on the other within the cache time', async () => {
      const flagged = await makeUser(gw.core);
      const locked = await makeUser(gw.core);
      const deleted = await makeUser(gw.core);
      for (const u of [flagged, locked, deleted]) expect(await b.propfind([u.name, PASSWORD])).to.equal(207);
      await gw.core.users.update(op, flagged.id, { dav_permission: false });
      for (let i = 0; i < gw.config.lockout.max_failures; i++)
        expect((await a.session(locked.name, 'wrong-password')).status).to.equal(401);
      await gw.core.users.remove(op, deleted.id);
      await within(CACHE_SECONDS * 1000 + MARGIN_MS, 'all three refused on the other instance', async () => {
        const statuses = await Promise.all(
          [flagged, locked, deleted].map((u) => b.propfind([u.name, PASSWORD])),
        );
        return statuses.every((s) => s === 401);
      });
      expect(await b.put([locked.name, PASSWORD], 'x.txt', 'x')).to.equal(401);
    });

    it('records one login per WebDAV client across both instances', async () => {
      const u = await makeUser(gw.core);
      // The client's requests land on either instance, as behind a load balancer, some at once.
      const statuses = await Promise.all([
        a.propfind([u.name, PASSWORD]),
        b.propfind([u.name, PASSWORD]),
        a.propfind([u.name, PASSWORD]),
        b.propfind([u.name, PASSWORD]),
      ]);
      expect(statuses).to.deep.equal([207, 207, 207, 207]);
      for (let i = 0; i < 3; i++) {
        expect(await b.propfind([u.name, PASSWORD])).to.equal(207);
        expect(await a.propfind([u.name, PASSWORD])).to.equal(207);
      }
      const logins = (await actionsOf(gw.core, u.name)).filter((x) => x.action === 'login');
      expect(logins.map((x) => x.interface)).to.deep.equal(['dav']);
    });
  },
);

(dbKind === 'postgres' ? describe : describe.skip)(
  'the login gate while the database is down (PostgreSQL behind a TCP proxy that is cut)',
  function () {
    this.timeout(180_000);
    let proxy: TcpProxy;
    let gw: TestGateway;
    let client: Client;
    let dropDb: () => Promise<void>;
    let user: { id: number; name: string };
    let sessionId: string;

    before(async () => {
      const db = await freshDatabase(TEST_DATABASE_URL, 'svc_gate');
      dropDb = db.drop;
      const direct = new URL(db.url);
      proxy = await startTcpProxy(direct.hostname, Number(direct.port || 5432));
      const proxied = new URL(db.url);
      proxied.host = `127.0.0.1:${proxy.port}`;
      gw = await startTestGateway({
        database: { url: proxied.toString() },
        ports: { webdav: 0, ftp: 0, sftp: 0 },
      });
      client = new Client(path.join(gw.config.data_dir, 'tls', 'cert.pem'), {
        https: gw.ports.https!,
        webdav: gw.ports.webdav!,
      });
      user = await makeUser(gw.core);
      const s = await client.session(user.name, PASSWORD);
      expect(s.status).to.equal(200);
      sessionId = (JSON.parse(s.body) as { id: string }).id;
    });
    after(async () => {
      await proxy?.restore().catch(() => undefined);
      await gw?.stop();
      await proxy?.close();
      await dropDb?.();
    });

    it('answers each protocol with its service failure, records no failedlogin and counts no lockout', async () => {
      const logs = captureLogs(gw.core);
      try {
        await proxy.cut();
        const name = user.name;

        const rest = await client.session(name, PASSWORD);
        expect(rest.status).to.equal(503);
        expect(JSON.parse(rest.body)).to.include({ type: 'service-unavailable/login-unavailable' });
        const withSession = await curl(
          path.join(gw.config.data_dir, 'tls', 'cert.pem'),
          gw.ports.https!,
          'GET',
          `${API}/folders/home/${name}`,
          { headers: [`X-SvcAPI-Auth: ${sessionId}`] },
        );
        expect(withSession.status).to.equal(503);

        expect(await client.propfind([name, PASSWORD])).to.equal(503);

        const ftp = await lftp(gw, 'plain', name, 'ls', { password: PASSWORD });
        expect(ftp.code).to.not.equal(0);
        expect(ftp.stderr).to.match(/421/);
        expect(ftp.stderr).to.not.match(/530/);

        const sftp = await sftpBatch(gw.ports.sftp!, name, { password: PASSWORD }, ['ls']);
        expect(sftp.code).to.not.equal(0);
        expect(sftp.stderr).to.not.match(/Permission denied/i);
        expect(sftp.stderr).to.match(/Connection closed/);
        const sftpLines = logs.lines.filter(
          (l) =>
            l.message === 'login gate unavailable: the database did not answer' && l.interface === 'sftp',
        );
        expect(sftpLines).to.have.length(1);
      } finally {
        logs.stop();
        await proxy.restore();
      }

      // Back up: no failedlogin, no count toward the lockout, and the same password works.
      await within(30_000, 'the database answers again', async () => {
        const r = await client.session(user.name, PASSWORD);
        return r.status === 200;
      });
      const failed = (await actionsOf(gw.core, user.name)).filter((x) => x.action === 'failedlogin');
      expect(failed).to.deep.equal([]);
      const row = await dbOf(gw.core).read((em) => em.findOneByOrFail(UserEntity, { id: user.id }));
      expect(row.failed_logins).to.equal(0);
      expect(row.locked_until).to.equal(null);
      expect(await client.propfind([user.name, PASSWORD])).to.equal(207);
    });
  },
);
