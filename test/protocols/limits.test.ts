/**
 * Connection limits (issue 12), as a flood and the users beside it meet them: one address's idle
 * connections no longer starve every other user (a gateway process whose open-file limit is
 * lowered with prlimit, so the flood would have exhausted it before); refusals in each protocol's
 * terms and logged once per address per minute; the login grace of FTP and SSH; the per-user
 * session limit; the per-user bound on FTP passive listeners; the HTTP body-progress timeout.
 * Connections, not data: the process runs on SQLite; the in-process gateways on the run's database.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { expect } from 'chai';
import ssh2 from 'ssh2';
import { dbKind, startTestGateway, type TestGateway } from '../helpers/gateway.ts';
import { serveProcess, stopProcess, type ServedProcess } from '../helpers/process.ts';
import { captureLogs } from '../helpers/logs.ts';
import { createFtpUser, PASSWORD, RawControl, run, writeSiteFile } from './ftp/clients.ts';
import { sftpBatch } from './sftp/clients.ts';

const ADMIN_PASSWORD = 'admin-password-limits';

/** Held is a connection opened and left idle, with what the server sent and whether it closed it. */
interface Held {
  socket: net.Socket;
  received: string;
  closed: boolean;
}

/** hold opens `count` idle TCP connections to `port` from `localAddress` and waits until each connected. */
async function hold(port: number, localAddress: string, count: number): Promise<Held[]> {
  return Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Held>((resolve, reject) => {
          const socket = net.connect({ host: '127.0.0.1', port, localAddress });
          const held: Held = { socket, received: '', closed: false };
          socket.on('data', (d: Buffer) => (held.received += d.toString('latin1')));
          socket.on('close', () => (held.closed = true));
          socket.once('connect', () => {
            socket.on('error', () => undefined);
            resolve(held);
          });
          socket.once('error', reject);
        }),
    ),
  );
}

/** until polls `check` every 100 ms until it holds, failing after `timeoutMs` with `what`. */
async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`still not: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** get makes one HTTPS request from `localAddress` on a new connection and reads the answer. */
function get(
  port: number,
  urlPath: string,
  opts: { localAddress?: string; method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; text: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path: urlPath,
        method: opts.method ?? 'GET',
        headers: opts.headers,
        rejectUnauthorized: false,
        agent: false,
        localAddress: opts.localAddress,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, headers: res.headers }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** logLines are a process's JSON log lines with `message`. */
function logLines(p: ServedProcess, message: string): Record<string, unknown>[] {
  return p.stderr
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.message === message);
}

describe(`connection limits (${dbKind})`, function () {
  this.timeout(120_000);

  describe('a gateway process whose open-file limit prlimit lowered to 256', () => {
    let dir: string;
    let gw: ServedProcess;
    const flood: Held[] = [];

    before(async () => {
      dir = mkdtempSync(path.join(os.tmpdir(), 'svc-limits-'));
      gw = await serveProcess(
        dir,
        { SVC_ADMIN_PASSWORD: ADMIN_PASSWORD, SVC_FTP_PASV_PORTS: '34200-34219' },
        { prefix: ['prlimit', '--nofile=256:256', '--'] },
      );
    });
    after(async () => {
      for (const h of flood) h.socket.destroy();
      if (gw) await stopProcess(gw);
      rmSync(dir, { recursive: true, force: true });
    });

    it('reads and logs the open-file limit once, with limits that keep well under it', () => {
      const lines = logLines(gw, 'connection limits');
      expect(lines).to.have.length(1);
      const line = lines[0]! as {
        open_files: { soft: number };
        max_connections: number;
        max_connections_per_address: number;
      };
      expect(line.open_files.soft).to.equal(256);
      expect(line.max_connections * 4).to.be.below(256);
      expect(line.max_connections_per_address).to.be.below(line.max_connections);
    });

    it('a flood of 300 idle connections from 127.0.0.2 leaves 127.0.0.1 logging in on every protocol; 127.0.0.2 is refused in each protocol`s terms, logged once a minute', async () => {
      const started = Date.now();
      const perAddress = (logLines(gw, 'connection limits')[0] as { max_connections_per_address: number })
        .max_connections_per_address;
      const listeners = ['https', 'webdav', 'ftp', 'ftps', 'sftp'];
      // 300 connections: more than the process has descriptors, so before the limits this flood
      // left every other user (and /healthz) refused.
      for (const name of listeners) flood.push(...(await hold(gw.ports[name]!, '127.0.0.2', 60)));
      expect(flood.length).to.be.above(256);
      await until(
        `all but ${perAddress} flood connections closed`,
        () => flood.filter((h) => !h.closed).length <= perAddress,
      );
      expect(flood.filter((h) => !h.closed)).to.have.length(perAddress);
      const fds = readdirSync(`/proc/${gw.child.pid}/fd`).length;
      expect(fds).to.be.below(256);

      // 127.0.0.1 logs in on every protocol while the flood holds its share.
      expect((await get(gw.ports.https!, '/healthz')).status).to.equal(200);
      const session = await get(gw.ports.https!, '/api/rest/v1/sessions', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }),
      });
      expect(session.status, session.text).to.equal(200);
      const basic = `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}`;
      const dav = await get(gw.ports.webdav!, '/', {
        method: 'PROPFIND',
        headers: { Authorization: basic, Depth: '0' },
      });
      expect(dav.status, dav.text).to.equal(207);
      for (const [scheme, port] of [
        ['ftp', gw.ports.ftp!],
        ['ftps', gw.ports.ftps!],
      ] as const) {
        const r = await run('curl', [
          '-sS',
          '--max-time',
          '20',
          '--insecure',
          '-u',
          `admin:${ADMIN_PASSWORD}`,
          `${scheme}://127.0.0.1:${port}/`,
        ]);
        expect(r.code, `${scheme}: ${r.stderr}`).to.equal(0);
      }
      const s = await sftpBatch(gw.ports.sftp!, 'admin', { password: ADMIN_PASSWORD }, ['pwd']);
      expect(s.code, s.stderr).to.equal(0);
      expect(s.stdout).to.include('Remote working directory: /');

      // 127.0.0.2, at its limit, is refused in each protocol's terms.
      const refusedHttp = await get(gw.ports.https!, '/healthz', { localAddress: '127.0.0.2' });
      expect(refusedHttp.status).to.equal(503);
      expect(refusedHttp.headers['retry-after']).to.equal('60');
      expect(refusedHttp.text).to.include('Too many connections from your address');
      const refusedDav = await get(gw.ports.webdav!, '/', { localAddress: '127.0.0.2' });
      expect(refusedDav.status).to.equal(503);
      // curl reports a 421 greeting as its timeout (28); -v shows the reply itself.
      const refusedFtp = await run('curl', [
        '-v',
        '--max-time',
        '20',
        '--interface',
        '127.0.0.2',
        '-u',
        `admin:${ADMIN_PASSWORD}`,
        `ftp://127.0.0.1:${gw.ports.ftp}/`,
      ]);
      expect(refusedFtp.code).to.not.equal(0);
      expect(refusedFtp.stderr).to.include('< 421 Too many connections from your address');
      const raw = await RawControl.connect(gw.ports.ftp!, '127.0.0.2').catch((err: Error) => err.message);
      expect(raw).to.include('421 Too many connections from your address');
      const refusedSsh = await sftpBatch(gw.ports.sftp!, 'admin', { password: ADMIN_PASSWORD }, ['pwd'], {
        bind: '127.0.0.2',
      });
      expect(refusedSsh.code).to.not.equal(0);
      expect(refusedSsh.stderr).to.match(
        /Received disconnect from 127\.0\.0\.1 port \d+:12: Too many connections/,
      );

      // One log line per address per minute, however many were refused; none for 127.0.0.1.
      const elapsed = Date.now() - started;
      const refusals = logLines(gw, 'connection refused');
      const fromFlood = refusals.filter((l) => l.ip === '127.0.0.2');
      expect(fromFlood.length).to.be.within(1, Math.floor(elapsed / 60_000) + 1);
      expect(fromFlood[0]).to.include({ limit: 'max_connections_per_address' });
      expect(refusals.filter((l) => l.ip === '127.0.0.1')).to.deep.equal([]);
    });
  });

  describe('a gateway with small limits', () => {
    let gw: TestGateway;

    before(async () => {
      gw = await startTestGateway({
        ports: { ftp: 0, ftps: 'off', sftp: 0, webdav: 0, ftp_pasv: '34300-34399' },
        limits: { max_connections: 1000, max_connections_per_address: 500, max_sessions_per_user: 2 },
        ftp: { login_grace_seconds: 2 },
        sftp: { login_grace_seconds: 2 },
        http: { body_timeout_seconds: 2 },
      });
      await createFtpUser(gw.core, 'limited');
      await createFtpUser(gw.core, 'other');
    });
    after(async () => {
      await gw?.stop();
    });

    it('closes an FTP connection that does not log in within the grace with 421, and keeps a logged-in one', async () => {
      const idle = await RawControl.connect(gw.ports.ftp!);
      const user = await RawControl.connect(gw.ports.ftp!);
      expect(await user.login('other')).to.match(/^230/);
      expect(await idle.reply(20_000)).to.equal('421 Login grace time exceeded; closing the connection');
      await until('the idle connection closed', () => idle.closed);
      expect(await user.send('NOOP')).to.match(/^200/);
      user.close();
    });

    it('disconnects an SSH connection that never authenticates after the grace, before and after key exchange', async () => {
      const silent = (await hold(gw.ports.sftp!, '127.0.0.1', 1))[0]!;
      const client = new ssh2.Client();
      let handshake = false;
      let ready = false;
      const closed = new Promise<void>((resolve) => client.on('close', () => resolve()));
      client.on('handshake', () => (handshake = true));
      client.on('ready', () => (ready = true));
      client.on('error', () => undefined);
      client.connect({
        host: '127.0.0.1',
        port: gw.ports.sftp!,
        username: 'other',
        // An authentication that never answers: the client sits after the key exchange.
        authHandler: () => undefined,
      });
      await closed;
      expect(handshake).to.be.true;
      expect(ready).to.be.false;
      await until('the silent socket closed', () => silent.closed);
      expect(silent.received).to.match(/^SSH-2\.0-svc-gateway/);
    });

    it('refuses a session over max_sessions_per_user on FTP (530 and closed: lftp stops at once) and SFTP (a disconnect naming it), across both', async () => {
      const first = await RawControl.connect(gw.ports.ftp!);
      const second = await RawControl.connect(gw.ports.ftp!);
      expect(await first.login('limited')).to.match(/^230/);
      expect(await second.login('limited')).to.match(/^230/);
      const third = await RawControl.connect(gw.ports.ftp!);
      expect(await third.login('limited')).to.equal(
        '530 This user has 2 sessions open, the most allowed; close one and log in again',
      );
      await until('the refused FTP session closed', () => third.closed);
      // lftp gives up at once: a 421 here (the old reply) it retried net:max-retries times, and
      // a 530 whose text matches its ftp:retry-530 rule too ("too many", "already connected").
      const started = Date.now();
      const lftp = await run(
        'lftp',
        [
          '-d',
          '-c',
          'set net:max-retries 5; set net:reconnect-interval-base 1; set net:reconnect-interval-multiplier 1; ' +
            `set ftp:ssl-allow no; open -u limited,${PASSWORD} ftp://127.0.0.1:${gw.ports.ftp}; ls`,
        ],
        30_000,
      );
      expect(lftp.code).to.not.equal(0);
      expect(lftp.stderr).to.include('Login failed: 530 This user has 2 sessions open');
      expect(lftp.stderr.match(/---> PASS/g) ?? []).to.have.length(1);
      expect(Date.now() - started).to.be.below(10_000);
      const refused = await sftpBatch(gw.ports.sftp!, 'limited', { password: PASSWORD }, ['pwd']);
      expect(refused.code).to.not.equal(0);
      expect(refused.stderr).to.match(
        /Received disconnect from 127\.0\.0\.1 port \d+:12: This user has 2 sessions open/,
      );
      // Another user is not counted with this one.
      const other = await sftpBatch(gw.ports.sftp!, 'other', { password: PASSWORD }, ['pwd']);
      expect(other.code, other.stderr).to.equal(0);
      // A place freed is a place again.
      first.close();
      await until('limited logs in over SFTP again', async () => {
        const r = await sftpBatch(gw.ports.sftp!, 'limited', { password: PASSWORD }, ['pwd']);
        return r.code === 0;
      });
      second.close();
    });

    it('cuts a WebDAV upload whose body stops arriving, and keeps one that keeps arriving slowly', async () => {
      const basic = `Basic ${Buffer.from(`other:${PASSWORD}`).toString('base64')}`;
      // Stalled: 1,000 of 100,000 bytes, then nothing.
      const socket = tls.connect({ host: '127.0.0.1', port: gw.ports.webdav!, rejectUnauthorized: false });
      await new Promise<void>((resolve) => socket.once('secureConnect', () => resolve()));
      let answer = '';
      socket.on('data', (d: Buffer) => (answer += d.toString()));
      const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
      socket.on('error', () => undefined);
      socket.write(
        `PUT /stalled.bin HTTP/1.1\r\nHost: x\r\nAuthorization: ${basic}\r\nContent-Length: 100000\r\n\r\n`,
      );
      socket.write(Buffer.alloc(1000, 1));
      await closed;
      expect(answer).to.equal('');
      const after = await get(gw.ports.webdav!, '/stalled.bin', { headers: { Authorization: basic } });
      expect(after.status).to.equal(404);

      // Slow but moving: 15 chunks 200 ms apart, longer in all than the 2 s body timeout.
      const slow = tls.connect({ host: '127.0.0.1', port: gw.ports.webdav!, rejectUnauthorized: false });
      await new Promise<void>((resolve) => slow.once('secureConnect', () => resolve()));
      let reply = '';
      slow.on('data', (d: Buffer) => (reply += d.toString()));
      slow.write(
        `PUT /slow.bin HTTP/1.1\r\nHost: x\r\nAuthorization: ${basic}\r\nContent-Length: 15000\r\n\r\n`,
      );
      for (let i = 0; i < 15; i++) {
        slow.write(Buffer.alloc(1000, 2));
        await new Promise((r) => setTimeout(r, 200));
      }
      await until('the slow upload answered', () => reply.includes('\r\n\r\n'));
      slow.destroy();
      expect(reply).to.match(/^HTTP\/1\.1 201/);
      const stored = await get(gw.ports.webdav!, '/slow.bin', { headers: { Authorization: basic } });
      expect(stored.text).to.have.length(15000);
    });
  });

  describe('the per-user session limit on REST and WebDAV', () => {
    let gw: TestGateway;
    let tmp: string;
    /**
     * 1 MiB sent at 256 KiB/s: an upload that holds its session about 4 s (a download would not: the
     * kernel's socket buffers on loopback take a whole MiB, and the server's response ends then).
     */
    const SLOW = ['--limit-rate', '256k'];

    before(async () => {
      gw = await startTestGateway({
        ports: { webdav: 0 },
        limits: { max_connections: 1000, max_connections_per_address: 500, max_sessions_per_user: 2 },
      });
      await createFtpUser(gw.core, 'busy');
      await createFtpUser(gw.core, 'calm');
      await writeSiteFile(gw.core, 'home/busy/small.txt', 'small');
      tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-http-sessions-'));
      writeFileSync(path.join(tmp, 'big.bin'), Buffer.alloc(1024 * 1024, 7));
    });
    after(async () => {
      await gw?.stop();
      if (tmp) rmSync(tmp, { recursive: true, force: true });
    });

    /** curl runs curl against the gateway's self-signed certificate from `address`. */
    const curl = (address: string, args: string[], timeoutMs = 60_000) =>
      run('curl', ['-sS', '-k', '--interface', address, '--max-time', '50', ...args], timeoutMs);
    const dav = (p: string) => `https://127.0.0.1:${gw.ports.webdav}${p}`;
    const rest = (p: string) => `https://127.0.0.1:${gw.port}/api/rest/v1${p}`;

    it('counts WebDAV and REST requests in progress as sessions: curl --parallel gets 2 uploads and 4 × 503 with Retry-After, REST a SPEC error; logged once', async () => {
      const logs = captureLogs(gw.core);
      try {
        const login = await curl('127.0.0.5', [
          '-H',
          'Content-Type: application/json',
          '-d',
          JSON.stringify({ username: 'busy', password: PASSWORD }),
          rest('/sessions'),
        ]);
        const sessionId = (JSON.parse(login.stdout) as { id: string }).id;
        expect(sessionId, login.stdout + login.stderr).to.be.a('string');

        // Six uploads at once on six connections: two hold the user's two sessions for ~4 s.
        const parallel = curl('127.0.0.5', [
          '--parallel',
          '--parallel-immediate',
          '--parallel-max',
          '6',
          ...SLOW,
          '-u',
          `busy:${PASSWORD}`,
          '-w',
          '%{http_code} %{size_upload} %header{retry-after}\n',
          ...Array.from({ length: 6 }, (_, i) => [
            '-o',
            '/dev/null',
            '-T',
            path.join(tmp, 'big.bin'),
            dav(`/up${i}.bin`),
          ]).flat(),
        ]);
        // Under way: the refusals came at once; the two admitted uploads go on for ~4 s.
        await new Promise((r) => setTimeout(r, 1_000));
        // REST, meanwhile: the same user's requests are over the limit too, in SPEC's error shape.
        const refused = await curl('127.0.0.5', [
          '-D',
          '-',
          '-H',
          `X-SvcAPI-Auth: ${sessionId}`,
          rest('/folders/home/busy'),
        ]);
        expect(refused.stdout).to.match(/^HTTP\/1\.1 503/);
        expect(refused.stdout).to.match(/^retry-after: 5\r$/im);
        const body = JSON.parse(refused.stdout.slice(refused.stdout.indexOf('\r\n\r\n') + 4)) as Record<
          string,
          unknown
        >;
        expect(body).to.include({ type: 'rate-limited/too-many-concurrent-requests', 'http-code': 503 });
        expect(String(body.error)).to.match(
          /^This user has 2 sessions open \(each request in progress is one\)/,
        );
        // Another user, and a site-wide key, are not counted with this one.
        const calm = await curl('127.0.0.5', [
          '-o',
          '/dev/null',
          '-w',
          '%{http_code}',
          '-u',
          `calm:${PASSWORD}`,
          '-X',
          'PROPFIND',
          '-H',
          'Depth: 0',
          dav('/'),
        ]);
        expect(calm.stdout).to.equal('207');
        const site = await curl('127.0.0.5', [
          '-o',
          '/dev/null',
          '-w',
          '%{http_code}',
          '-H',
          `X-SvcAPI-Key: ${gw.siteKey}`,
          rest('/folders/home/busy'),
        ]);
        expect(site.stdout).to.equal('200');

        const done = await parallel;
        expect(done.code, done.stderr).to.equal(0);
        const answers = done.stdout.trim().split('\n');
        expect(answers.filter((a) => /^201 1048576 ?$/.test(a))).to.have.length(2);
        expect(answers.filter((a) => /^503 \d+ 5$/.test(a))).to.have.length(4);
        // The refused uploads left nothing; the admitted ones are whole.
        const listing = await curl('127.0.0.5', [
          '-H',
          `X-SvcAPI-Key: ${gw.siteKey}`,
          rest('/folders/home/busy'),
        ]);
        const uploaded = (JSON.parse(listing.stdout) as { path: string; size: number }[]).filter((e) =>
          e.path.startsWith('home/busy/up'),
        );
        expect(uploaded.map((e) => e.size)).to.deep.equal([1048576, 1048576]);
        // A place freed is a place again.
        const again = await curl('127.0.0.5', [
          '-o',
          '/dev/null',
          '-w',
          '%{http_code}',
          '-H',
          `X-SvcAPI-Auth: ${sessionId}`,
          rest('/folders/home/busy'),
        ]);
        expect(again.stdout).to.equal('200');
        // Five refusals from one address within a minute: one line.
        const lines = logs.lines.filter((l) => l.message === 'connection refused' && l.ip === '127.0.0.5');
        expect(lines).to.have.length(1);
        expect(lines[0]).to.include({ limit: 'max_sessions_per_user', user: 'busy' });
        expect(logs.lines.filter((l) => l.message === 'request failed' || l.level === 'error')).to.deep.equal(
          [],
        );
      } finally {
        logs.stop();
      }
    });

    it('rclone copies 8 files with 8 transfers through a limit of 2: it waits on the 503s and every file arrives whole', async () => {
      const src = path.join(tmp, 'rclone-src');
      mkdirSync(src);
      for (let i = 0; i < 8; i++) writeFileSync(path.join(src, `f${i}.bin`), Buffer.alloc(256 * 1024, i));
      const pass = (await run('rclone', ['obscure', PASSWORD])).stdout.trim();
      const flags = [
        '--webdav-url',
        dav('/'),
        '--webdav-user',
        'busy',
        '--webdav-pass',
        pass,
        '--no-check-certificate',
        '--config',
        '/dev/null',
        '--transfers',
        '8',
        '--bwlimit',
        '1M',
        '-vv',
      ];
      const copy = await run('rclone', ['copy', src, ':webdav:in', ...flags], 120_000);
      expect(copy.code, copy.stderr.slice(-3000)).to.equal(0);
      // The limit was met (rclone logged the 503s it waited on), and nothing was lost to it.
      expect(copy.stderr).to.match(/503/);
      const check = await run('rclone', ['check', src, ':webdav:in', ...flags.slice(0, 9)], 60_000);
      expect(check.code, check.stderr.slice(-3000)).to.equal(0);
    });
  });

  describe('the total connection limit', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startTestGateway({ limits: { max_connections: 5, max_connections_per_address: 3 } });
    });
    after(async () => {
      await gw?.stop();
    });

    it('refuses with 503 once the gateway holds max_connections, from any address, and admits again when one closes', async () => {
      const held = [...(await hold(gw.port, '127.0.0.2', 3)), ...(await hold(gw.port, '127.0.0.3', 2))];
      const refused = await get(gw.port, '/healthz', { localAddress: '127.0.0.4' });
      expect(refused.status).to.equal(503);
      expect(refused.text).to.include('The server has too many connections');
      held[0]!.socket.destroy();
      await until('a request from 127.0.0.4 is served', async () => {
        const r = await get(gw.port, '/healthz', { localAddress: '127.0.0.4' });
        return r.status === 200;
      });
      for (const h of held) h.socket.destroy();
    });
  });

  describe('the per-address limit over FTP, as lftp meets it', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startTestGateway({
        ports: { ftp: 0, ftps: 'off', ftp_pasv: '34500-34519' },
        limits: { max_connections: 1000, max_connections_per_address: 2 },
      });
      await createFtpUser(gw.core, 'crowded');
    });
    after(async () => {
      await gw?.stop();
    });

    it('greets one connection too many with 421; lftp reconnects net:max-retries times, as against any busy server, and stops', async () => {
      // The greeting 421 is what FTP servers send when busy (vsftpd's max_per_ip too). lftp takes
      // any greeting but 2xx for a busy server whatever its text, and reconnects with its growing
      // delay (15 s up to 5 min) net:max-retries times (1,000 by default): bounded, not a flood.
      const held = await hold(gw.ports.ftp!, '127.0.0.9', 2);
      try {
        const started = Date.now();
        const r = await run(
          'lftp',
          [
            '-d',
            '-c',
            'set net:socket-bind-ipv4 127.0.0.9; set net:max-retries 3; set net:reconnect-interval-base 1; ' +
              `set net:reconnect-interval-multiplier 1; set ftp:ssl-allow no; open -u crowded,${PASSWORD} ftp://127.0.0.1:${gw.ports.ftp}; ls`,
          ],
          30_000,
        );
        expect(r.code).to.not.equal(0);
        const greetings =
          r.stderr.match(/^<--- 421 Too many connections from your address; try again later/gm) ?? [];
        expect(greetings.length, r.stderr.slice(-1500)).to.equal(3);
        expect(r.stderr).to.not.match(/---> PASS/);
        expect(Date.now() - started).to.be.below(20_000);
      } finally {
        for (const h of held) h.socket.destroy();
      }
    });
  });

  describe('passive listeners', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startTestGateway({
        ports: { ftp: 0, ftps: 'off', ftp_pasv: '34400-34499' },
        limits: { max_connections: 1000, max_connections_per_address: 500, max_sessions_per_user: 0 },
      });
      await createFtpUser(gw.core, 'hoarder');
      await createFtpUser(gw.core, 'neighbour');
    });
    after(async () => {
      await gw?.stop();
    });

    it('110 sessions of one user holding PASV listeners take a quarter of the range; another user still gets a port', async () => {
      const sessions: RawControl[] = [];
      const replies: string[] = [];
      try {
        for (let batch = 0; batch < 11; batch++) {
          const opened = await Promise.all(
            Array.from({ length: 10 }, async () => {
              const c = await RawControl.connect(gw.ports.ftp!);
              expect(await c.login('hoarder')).to.match(/^230/);
              return c;
            }),
          );
          sessions.push(...opened);
        }
        for (const c of sessions) replies.push(await c.send('PASV'));
        expect(replies.filter((r) => r.startsWith('227'))).to.have.length(25);
        const refused = replies.filter((r) => !r.startsWith('227'));
        expect(refused).to.have.length(85);
        expect(refused[0]).to.equal(
          '425 Too many passive listeners for this user (at most 25); try again later',
        );
        const r = await run('curl', [
          '-sS',
          '--max-time',
          '20',
          '-u',
          `neighbour:${PASSWORD}`,
          `ftp://127.0.0.1:${gw.ports.ftp}/`,
        ]);
        expect(r.code, r.stderr).to.equal(0);
      } finally {
        for (const c of sessions) c.close();
      }
    });
  });
});
