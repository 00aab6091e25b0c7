/**
 * PROXY protocol v1/v2 and X-Forwarded-For (issue 12, item 2), through real clients: curl (REST,
 * WebDAV, and its own --haproxy-protocol header), lftp (FTP, implicit FTPS) and OpenSSH sftp, each
 * run through a relay that plays the load balancer: it connects to the gateway from 127.0.0.1 (the
 * trusted proxy) or 127.0.0.3 (an untrusted one) and prepends a header carrying 203.0.113.7. The
 * user's allowed_ips admits only 203.0.113.7, so a login succeeds only when the gateway believed
 * the header, and the `login` Action must name that address. The gateway listens on 127.0.0.5,
 * so a PASV reply naming it names neither the proxy nor the client.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { operatorPrincipal } from '../../src/core/index.ts';
import { ActionEntity, type ActionRow } from '../../src/db/entities.ts';
import { dbKind, startTestGateway, type TestGateway } from '../helpers/gateway.ts';
import { dbOf } from '../helpers/internals.ts';
import { startRelay, type HeaderKind, type Relay } from '../helpers/proxy-relay.ts';
import { RawControl, run } from './ftp/clients.ts';
import { unique } from './rest/client.ts';
import { sftpBatch } from './sftp/clients.ts';

const GATEWAY = '127.0.0.5';
const TRUSTED = '127.0.0.1';
const UNTRUSTED = '127.0.0.3';
const CLIENT = '203.0.113.7';
const PASSWORD = 'proxy-password-1';
const HEADER_TIMEOUT_MS = 1000;
const API = '/api/rest/v1';
const PASV_PORTS = 4;

type Listener = 'https' | 'webdav' | 'ftp' | 'ftps' | 'sftp';
const INTERFACE: Record<Listener, string> = {
  https: 'restapi',
  webdav: 'dav',
  ftp: 'ftp',
  ftps: 'ftp',
  sftp: 'sftp',
};

describe(`PROXY protocol and X-Forwarded-For from trusted proxies (${dbKind})`, function () {
  this.timeout(120_000);
  let gw: TestGateway;
  let dir: string;
  let certFile: string;
  const relays: Relay[] = [];

  before(async () => {
    // The passive range is forwarded by the "load balancer" too, without a header. Below the
    // kernel's ephemeral range (32768+), so no client socket of another test can hold one of its
    // ports, and clear of the other tests' fixed ranges (21700…, 23100…).
    const first = 24_000 + Math.floor(Math.random() * 5_000);
    gw = await startTestGateway({
      bind: GATEWAY,
      ports: { webdav: 0, ftp: 0, ftps: 0, sftp: 0, ftp_pasv: `${first}-${first + PASV_PORTS - 1}` },
      proxy: { trusted: [TRUSTED], header_timeout_ms: HEADER_TIMEOUT_MS },
    });
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-proxy-'));
    certFile = path.join(gw.config.data_dir, 'tls', 'cert.pem');
    writeFileSync(path.join(dir, 'upload.txt'), 'through the proxy\n');
    for (let port = first; port < first + PASV_PORTS; port++)
      relays.push(await startRelay({ host: GATEWAY, port, from: TRUSTED, header: 'none', listenPort: port }));
  });

  after(async () => {
    await Promise.all(relays.map((r) => r.close()));
    await gw?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** relay starts a relay to one of the gateway's listeners. */
  async function relay(
    listener: Listener,
    from: string,
    header: HeaderKind,
    client = CLIENT,
  ): Promise<number> {
    const r = await startRelay({ host: GATEWAY, port: gw.ports[listener]!, from, header, client });
    relays.push(r);
    return r.port;
  }

  /** makeUser creates a user with full rights whose allowed_ips admits only `allowed`. */
  async function makeUser(allowed = CLIENT): Promise<string> {
    const name = unique('proxy');
    await gw.core.namespace.mkdir(operatorPrincipal(), `home/${name}`);
    await gw.core.users.create(operatorPrincipal(), {
      username: name,
      password: PASSWORD,
      user_root: `home/${name}/`,
      grant_permission: 'full',
      allowed_ips: allowed,
    });
    return name;
  }

  function actionsOf(username: string): Promise<ActionRow[]> {
    return dbOf(gw.core).read((em) => em.find(ActionEntity, { where: { username }, order: { id: 'ASC' } }));
  }

  /** logins are the user's login and failedlogin Actions as `action interface ip` lines. */
  async function logins(username: string): Promise<string[]> {
    return (await actionsOf(username))
      .filter((a) => a.action === 'login' || a.action === 'failedlogin')
      .map((a) => `${a.action} ${a.interface} ${a.ip}`);
  }

  /** curl runs curl against `port` on `host` (the name in the certificate is localhost). */
  async function curl(
    port: number,
    method: string,
    urlPath: string,
    opts: { host?: string; user?: string; headers?: string[]; body?: string; args?: string[] } = {},
  ): Promise<number> {
    const args = ['-sS', '--max-time', '20', '--cacert', certFile, '-X', method, '-o', '/dev/null'];
    args.push('-w', '%{http_code}', '--resolve', `localhost:${port}:${opts.host ?? '127.0.0.1'}`);
    if (opts.user) args.push('-u', `${opts.user}:${PASSWORD}`);
    for (const h of opts.headers ?? []) args.push('-H', h);
    if (opts.body !== undefined) args.push('--data-binary', opts.body);
    args.push(...(opts.args ?? []), `https://localhost:${port}${urlPath}`);
    return Number((await run('curl', args)).stdout.trim() || 0);
  }

  /** session is POST /sessions; the status tells whether the login was admitted. */
  function session(
    port: number,
    user: string,
    opts: { host?: string; headers?: string[]; args?: string[] } = {},
  ) {
    return curl(port, 'POST', `${API}/sessions`, {
      ...opts,
      headers: ['Content-Type: application/json', ...(opts.headers ?? [])],
      body: JSON.stringify({ username: user, password: PASSWORD }),
    });
  }

  /** logIn logs `user` in through `port` with the listener's real client; true when admitted. */
  async function logIn(listener: Listener, port: number, user: string): Promise<boolean> {
    switch (listener) {
      case 'https':
        return (await session(port, user)) === 200;
      case 'webdav':
        return (await curl(port, 'PROPFIND', '/', { user, headers: ['Depth: 0'] })) === 207;
      case 'ftp':
      case 'ftps': {
        // An upload and a listing: lftp takes the PASV address for a wrong one and connects to the
        // proxy's, which forwards the passive range as a load balancer does.
        const settings = [
          'set cmd:fail-exit yes',
          'set net:max-retries 1',
          'set net:timeout 10',
          'set ssl:verify-certificate no',
          'set ftp:passive-mode yes',
          listener === 'ftps' ? 'set ftp:ssl-protect-data yes' : 'set ftp:ssl-allow no',
        ].join('; ');
        const url = `${listener}://127.0.0.1:${port}`;
        const local = path.join(dir, 'upload.txt');
        const r = await run('lftp', [
          '-c',
          `${settings}; open -u '${user}','${PASSWORD}' ${url}; put ${local} -o up.txt; cls -1`,
        ]);
        if (r.code === 0) expect(r.stdout).to.contain('up.txt');
        return r.code === 0;
      }
      case 'sftp': {
        const r = await sftpBatch(
          port,
          user,
          { password: PASSWORD },
          [`put ${dir}/upload.txt up.txt`, 'ls -1'],
          {
            timeoutMs: 30_000,
          },
        );
        if (r.code === 0) expect(r.stdout).to.contain('up.txt');
        return r.code === 0;
      }
    }
  }

  for (const listener of ['https', 'webdav', 'ftp', 'ftps', 'sftp'] as const) {
    for (const version of ['v1', 'v2'] as const) {
      it(`${listener}: a ${version} header is believed from the trusted proxy only`, async () => {
        const user = await makeUser();
        expect(await logIn(listener, await relay(listener, TRUSTED, version), user)).to.equal(true);
        expect(await logins(user)).to.deep.equal([`login ${INTERFACE[listener]} ${CLIENT}`]);
        // The same header from another address is not believed: that proxy's connection is
        // refused, and nothing logs in as 203.0.113.7.
        expect(await logIn(listener, await relay(listener, UNTRUSTED, version), user)).to.equal(false);
        expect((await logins(user)).filter((l) => l.startsWith('login'))).to.have.length(1);
      });
    }
  }

  it('a v2 header carrying an IPv6 client is believed (REST)', async () => {
    const user = await makeUser('2001:db8::7');
    expect(await session(await relay('https', TRUSTED, 'v2', '2001:db8::7'), user)).to.equal(200);
    expect(await logins(user)).to.deep.equal(['login restapi 2001:db8::7']);
  });

  it("curl's own --haproxy-protocol header is believed through a trusted relay", async () => {
    // curl states its own source address (127.0.0.7 here) in a v1 header; the relay adds none.
    const user = await makeUser('127.0.0.7');
    const port = await relay('https', TRUSTED, 'none');
    const args = ['--haproxy-protocol', '--interface', '127.0.0.7'];
    expect(await session(port, user, { args })).to.equal(200);
    expect(await logins(user)).to.deep.equal(['login restapi 127.0.0.7']);
  });

  it("a trusted proxy's connection without a header is its own (health checks)", async () => {
    expect(await curl(await relay('https', TRUSTED, 'none'), 'GET', '/healthz')).to.equal(200);
    expect(await curl(await relay('webdav', TRUSTED, 'v2-local'), 'OPTIONS', '/')).to.equal(200);
    // FTP greets first: a silent trusted connection is greeted after the header timeout, a v2
    // LOCAL one at once; both are the proxy's, so allowed_ips refuses the login from there.
    const user = await makeUser();
    for (const header of ['none', 'v2-local'] as const) {
      const c = await RawControl.connect(await relay('ftp', TRUSTED, header));
      expect(await c.login(user, PASSWORD)).to.match(/^530/);
      c.close();
    }
    expect(await session(gw.ports.https!, user, { host: GATEWAY })).to.equal(401);
    expect(await logins(user)).to.deep.equal([
      `failedlogin ftp ${TRUSTED}`,
      `failedlogin ftp ${TRUSTED}`,
      `failedlogin restapi ${TRUSTED}`,
    ]);
  });

  /** closedWithout connects through `port` and tells whether it closed with no 220 greeting. */
  async function closedWithoutGreeting(port: number): Promise<boolean> {
    const socket = net.connect({ host: '127.0.0.1', port });
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (received += d));
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('close', resolve));
    return !received.includes('220');
  }

  it('a malformed or unfinished header from the trusted proxy closes the connection', async () => {
    const malformed = Buffer.from('PROXY TCP4 203.0.113.999 127.0.0.5 4000 21\r\n');
    expect(await closedWithoutGreeting(await relay('ftp', TRUSTED, malformed))).to.equal(true);
    // Half a header, then silence: closed at the header timeout.
    expect(
      await closedWithoutGreeting(await relay('ftp', TRUSTED, Buffer.from('PROXY TCP4 203.0'))),
    ).to.equal(true);
  });

  it('FTP closes the session on a header from an untrusted address', async () => {
    const c = await RawControl.connect(await relay('ftp', UNTRUSTED, 'v1'));
    expect(await c.reply()).to.match(/^421 /);
    await c.reply();
    expect(c.closed).to.equal(true);
  });

  it('PASV through the proxy names the gateway, not the proxy or the client', async () => {
    const user = await makeUser();
    const c = await RawControl.connect(await relay('ftp', TRUSTED, 'v1'));
    const r = await c.login(user, PASSWORD);
    expect(r).to.match(/^230/);
    const reply = await c.send('PASV');
    expect(reply).to.match(/^227 .*\(127,0,0,5,\d+,\d+\)/);
    c.close();
  });

  describe('X-Forwarded-For', () => {
    for (const listener of ['https', 'webdav'] as const) {
      const admitted = (user: string, opts: { host?: string; headers?: string[]; args?: string[] }) =>
        listener === 'https'
          ? session(gw.ports.https!, user, { host: GATEWAY, ...opts }).then((s) => s === 200)
          : curl(gw.ports.webdav!, 'PROPFIND', '/', {
              host: GATEWAY,
              user,
              ...opts,
              headers: ['Depth: 0', ...(opts.headers ?? [])],
            }).then((s) => s === 207);

      it(`${listener}: the rightmost address that is not a trusted proxy is the client`, async () => {
        const user = await makeUser();
        const iface = INTERFACE[listener];
        // From the trusted proxy: 203.0.113.7 is the address it saw; what is left of it the
        // client wrote itself.
        expect(await admitted(user, { headers: [`X-Forwarded-For: 198.51.100.1, ${CLIENT}`] })).to.equal(
          true,
        );
        // From an untrusted address the header is not believed.
        const untrusted = { headers: [`X-Forwarded-For: ${CLIENT}`], args: ['--interface', UNTRUSTED] };
        expect(await admitted(user, untrusted)).to.equal(false);
        // A client that writes the allowed address itself is seen behind it.
        expect(await admitted(user, { headers: [`X-Forwarded-For: ${CLIENT}, 198.51.100.9`] })).to.equal(
          false,
        );
        expect(await logins(user)).to.deep.equal([
          `login ${iface} ${CLIENT}`,
          `failedlogin ${iface} ${UNTRUSTED}`,
          `failedlogin ${iface} 198.51.100.9`,
        ]);
      });
    }
  });
});
