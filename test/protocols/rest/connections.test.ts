/**
 * Live connections (issue 15, item 4): GET /connections and DELETE /connections/:id on both
 * databases. A real FTP login on this gateway, and a second Connections over the same database
 * standing for another instance (another process behind the balancer: test/protocols/
 * connections-cluster.test.ts runs the real thing on PostgreSQL): registration, renewal with the
 * transfer's bytes, the end request reaching the owner at its next renewal, and a dead
 * instance's rows hidden after the expiry and deleted later.
 */
import https from 'node:https';
import net from 'node:net';
import { expect } from 'chai';
import { operatorPrincipal, type Principal } from '../../../src/core/index.ts';
import { Connections } from '../../../src/core/connections/connections.ts';
import type { CoreContext } from '../../../src/core/context.ts';
import { Paginator } from '../../../src/core/pagination.ts';
import { ConnectionEntity, InstanceEntity } from '../../../src/db/entities.ts';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.ts';
import { dbOf } from '../../helpers/internals.ts';
import { API, createKey, createUser, expectError, keyAuth } from './client.ts';

interface Listed {
  id: number;
  instance: string;
  interface: string;
  username: string;
  user_id: number | null;
  ip: string;
  transfer_path: string | null;
  transfer_direction: string | null;
  transfer_bytes: number;
  ending: boolean;
  last_seen_at: string;
}

/** FtpClient is a raw FTP control connection: the lines it received, and whether it closed. */
interface FtpClient {
  lines: string[];
  closed: Promise<void>;
  send(line: string): void;
  waitFor(prefix: string): Promise<string>;
}

function ftpClient(port: number): Promise<FtpClient> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const lines: string[] = [];
    let buffer = '';
    const waiters: (() => void)[] = [];
    socket.on('data', (d: Buffer) => {
      buffer += d.toString('utf8');
      let at: number;
      while ((at = buffer.indexOf('\r\n')) >= 0) {
        lines.push(buffer.slice(0, at));
        buffer = buffer.slice(at + 2);
      }
      for (const w of waiters.splice(0)) w();
    });
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    socket.once('error', reject);
    const client: FtpClient = {
      lines,
      closed,
      send: (line) => socket.write(`${line}\r\n`),
      waitFor: async (prefix) => {
        for (;;) {
          const found = lines.find((l) => l.startsWith(prefix));
          if (found) return found;
          await new Promise<void>((r) => waiters.push(r));
        }
      },
    };
    socket.once('connect', () => resolve(client));
  });
}

describe('REST /connections: live connections of every instance', () => {
  let gw: TestGateway;
  let user: Awaited<ReturnType<typeof createUser>>;
  let other: Connections;
  const site = () => ({ headers: keyAuth(gw.siteKey) });
  const list = async (): Promise<Listed[]> => {
    const r = await gw.request('GET', `${API}/connections`, site());
    expect(r.status, r.text).to.equal(200);
    return r.json as Listed[];
  };
  const principalOf = (): Principal => ({
    ...operatorPrincipal(),
    operator: false,
    interface: 'sftp',
    ip: '192.0.2.7',
    user: { id: user.id, username: user.username, site_admin: false } as Principal['user'],
  });

  before(async () => {
    gw = await startTestGateway({ ports: { ftp: 0, webdav: 0 } });
    user = await createUser(gw, { user_root: '', grant_permission: 'full' });
    // Another instance on the same database: its own Connections, renewed only when the test says.
    const ctx = { db: dbOf(gw.core), log: gw.core.log, paginator: new Paginator('other') };
    other = new Connections(ctx as unknown as CoreContext);
  });
  after(async () => {
    await other.stop();
    await gw.stop();
  });

  it('lists an FTP session of this instance once renewed, to site admins only', async () => {
    const ftp = await ftpClient(gw.ports.ftp!);
    await ftp.waitFor('220');
    ftp.send(`USER ${user.username}`);
    await ftp.waitFor('331');
    ftp.send(`PASS ${user.password}`);
    await ftp.waitFor('230');
    await gw.core.connections.renew();
    const mine = (await list()).filter((c) => c.username === user.username);
    expect(mine).to.have.length(1);
    expect(mine[0]).to.include({
      interface: 'ftp',
      user_id: user.id,
      ip: '127.0.0.1',
      instance: gw.core.connections.instance,
      transfer_path: null,
      ending: false,
    });

    const key = await createKey(gw, user.id);
    await expectError(
      await gw.request('GET', `${API}/connections`, { headers: keyAuth(key.key) }),
      403,
      'not-authorized/site-admin-required',
    );
    await expectError(
      await gw.request('DELETE', `${API}/connections/${mine[0]!.id}`, { headers: keyAuth(key.key) }),
      403,
      'not-authorized/site-admin-required',
    );

    // Ending it on this instance closes it at once: the client reads 421 and the connection closes.
    const r = await gw.request('DELETE', `${API}/connections/${mine[0]!.id}`, site());
    expect(r.status, r.text).to.equal(200);
    await ftp.closed;
    expect(ftp.lines.at(-1)).to.match(/^421 .*ended by an administrator/);
    // The server's side of the socket closes a moment after the client's: its row goes at the
    // renewal after that.
    let left = mine;
    for (let i = 0; i < 50 && left.length; i++) {
      await new Promise((r) => setTimeout(r, 100));
      await gw.core.connections.renew();
      left = (await list()).filter((c) => c.username === user.username);
    }
    expect(left).to.deep.equal([]);
  });

  it('lists a WebDAV client (user and address) while it makes requests; ending it cuts its sockets', async () => {
    const agent = new https.Agent({ keepAlive: true, rejectUnauthorized: false });
    const auth = `Basic ${Buffer.from(`${user.username}:${user.password}`).toString('base64')}`;
    const propfind = () =>
      new Promise<{ status: number; socket: net.Socket }>((resolve, reject) => {
        const req = https.request(
          { host: '127.0.0.1', port: gw.ports.webdav!, method: 'PROPFIND', path: '/', agent },
          (res) => {
            res.resume();
            res.on('end', () => resolve({ status: res.statusCode ?? 0, socket: req.socket as net.Socket }));
          },
        );
        req.setHeader('Authorization', auth);
        req.setHeader('Depth', '0');
        req.on('error', reject);
        req.end();
      });
    const first = await propfind();
    expect(first.status).to.equal(207);
    await gw.core.connections.renew();
    const mine = (await list()).filter((c) => c.username === user.username);
    expect(mine.map((c) => c.interface)).to.deep.equal(['dav']);
    expect(mine[0]!.ip).to.equal('127.0.0.1');
    // A second request is the same client: still one row.
    await propfind();
    await gw.core.connections.renew();
    expect((await list()).filter((c) => c.username === user.username)).to.have.length(1);
    // Ending it closes the client's kept-alive socket and drops the row.
    const cut = new Promise<void>((r) => first.socket.once('close', () => r()));
    const r = await gw.request('DELETE', `${API}/connections/${mine[0]!.id}`, site());
    expect(r.status, r.text).to.equal(200);
    await cut;
    await gw.core.connections.renew();
    expect((await list()).filter((c) => c.username === user.username)).to.deep.equal([]);
    agent.destroy();
  });

  it("shows another instance's connection with its transfer, renewed with the bytes so far", async () => {
    let bytes = 1000;
    const live = other.open({ principal: principalOf(), ip: '192.0.2.7', close: () => undefined });
    await other.renew();
    let row = (await list()).find((c) => c.id === live.id)!;
    expect(row).to.include({
      instance: other.instance,
      interface: 'sftp',
      ip: '192.0.2.7',
      transfer_path: null,
    });
    expect(other.instance).to.not.equal(gw.core.connections.instance);

    const t = live.transfer({ path: '/big.iso', direction: 'upload', bytes: () => bytes });
    bytes = 123_456;
    await other.renew();
    row = (await list()).find((c) => c.id === live.id)!;
    expect(row).to.include({
      transfer_path: '/big.iso',
      transfer_direction: 'upload',
      transfer_bytes: 123_456,
    });
    const seen = row.last_seen_at;
    t.end();
    await other.renew();
    row = (await list()).find((c) => c.id === live.id)!;
    expect(row).to.include({ transfer_path: null, transfer_bytes: 0 });
    expect(Date.parse(row.last_seen_at)).to.be.at.least(Date.parse(seen));

    live.close();
    await other.renew();
    expect((await list()).map((c) => c.id)).to.not.include(live.id);
  });

  it('ends a connection of another instance at that instance’s next renewal', async () => {
    let closed = 0;
    const live = other.open({ principal: principalOf(), ip: '192.0.2.8', close: () => (closed += 1) });
    await other.renew();
    const r = await gw.request('DELETE', `${API}/connections/${live.id}`, site());
    expect(r.status, r.text).to.equal(200);
    expect(closed).to.equal(0);
    expect((await list()).find((c) => c.id === live.id)).to.include({ ending: true });
    await other.renew();
    expect(closed).to.equal(1);
    // The adapter's close callback ends the session, which unregisters it.
    live.close();
    await other.renew();
    expect((await list()).map((c) => c.id)).to.not.include(live.id);
    await expectError(
      await gw.request('DELETE', `${API}/connections/${live.id}`, site()),
      404,
      'not-found/connection-not-found',
    );
    await expectError(
      await gw.request('DELETE', `${API}/connections/12x`, site()),
      404,
      'not-found/connection-not-found',
    );
  });

  it("hides a dead instance's rows after the expiry and deletes them later", async () => {
    const dead = new Connections({
      db: dbOf(gw.core),
      log: gw.core.log,
      paginator: new Paginator('dead'),
    } as unknown as CoreContext);
    const live = dead.open({ principal: principalOf(), ip: '192.0.2.9', close: () => undefined });
    await dead.renew();
    expect((await list()).map((c) => c.id)).to.include(live.id);
    // The instance dies (no more renewals); time passes for its row.
    const db = dbOf(gw.core);
    const setSeen = (ago: number) =>
      db.work((em) =>
        em.update(ConnectionEntity, { id: live.id }, { last_seen_at: new Date(Date.now() - ago) }),
      );
    await setSeen(gw.core.connections.timing.expireMs + 1000);
    expect((await list()).map((c) => c.id)).to.not.include(live.id);
    await expectError(
      await gw.request('DELETE', `${API}/connections/${live.id}`, site()),
      404,
      'not-found/connection-not-found',
    );
    const count = () => db.read((em) => em.countBy(ConnectionEntity, { id: live.id }));
    expect(await count()).to.equal(1);
    await gw.core.connections.forget();
    expect(await count()).to.equal(1);
    await setSeen(gw.core.connections.timing.forgetMs + 1000);
    expect(await gw.core.connections.forget()).to.be.at.least(1);
    expect(await count()).to.equal(0);
  });

  it('GET /site lists every instance that renews its row, even without connections, and drops a dead one', async () => {
    const hosts = async () => {
      const r = await gw.request('GET', `${API}/site`, site());
      expect(r.status, r.text).to.equal(200);
      return (r.json as { instances: { pid: number; current: boolean }[] }).instances;
    };
    const another = new Connections({
      db: dbOf(gw.core),
      log: gw.core.log,
      paginator: new Paginator('another'),
    } as unknown as CoreContext);
    // The other instances of this file's tests that renewed already are seen too.
    const others = async () => (await hosts()).filter((i) => !i.current).length;
    const before = await others();
    await another.renew(); // no connection: its own row alone
    const seen = await hosts();
    expect(seen.filter((i) => i.current)).to.have.length(1);
    expect(seen.filter((i) => !i.current)).to.have.length(before + 1);
    // It stops renewing (killed): once its row is older than the expiry, it is no longer seen.
    await dbOf(gw.core).work((em) =>
      em.update(
        InstanceEntity,
        { id: another.instance },
        { last_seen_at: new Date(Date.now() - gw.core.connections.timing.expireMs - 1000) },
      ),
    );
    expect(await others()).to.equal(before);
    await another.stop();
  });

  it('pages the list with a cursor', async () => {
    const many = Array.from({ length: 3 }, (_, i) =>
      other.open({ principal: principalOf(), ip: `192.0.2.${20 + i}`, close: () => undefined }),
    );
    await other.renew();
    const first = await gw.request('GET', `${API}/connections?per_page=2`, site());
    expect(first.status, first.text).to.equal(200);
    expect(first.json).to.have.length(2);
    const cursor = first.headers['x-svc-cursor-next'] as string;
    expect(cursor).to.be.a('string');
    const next = await gw.request(
      'GET',
      `${API}/connections?per_page=2&cursor=${encodeURIComponent(cursor)}`,
      site(),
    );
    const ids = [...(first.json as Listed[]), ...(next.json as Listed[])].map((c) => c.id);
    for (const c of many) expect(ids).to.include(c.id);
    for (const c of many) c.close();
    await other.renew();
  });
});
