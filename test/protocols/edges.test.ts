/**
 * Issue 12's small fixes, each seen from the wire with a real client: a locked-out user and an
 * unknown name answer alike and take as long (no username oracle), lftp stops on a locked-out 530
 * and on the per-address failed-login limit's 530,
 * WebDAV refuses a Destination on another host with 502, REST bodies that are not UTF-8 are 400
 * `invalid-input-encoding`, and 1,000 small FTPS downloads run on one login on TLS 1.3 and 1.2.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import https from 'node:https';
import { expect } from 'chai';
import { operatorPrincipal } from '../../src/core/index.ts';
import { dbKind, type TestGateway } from '../helpers/gateway.ts';
import { filesOf } from '../helpers/internals.ts';
import { actions } from '../unit/core/fixtures.ts';
import { createFtpUser, lftp, PASSWORD, startFtpGateway, writeSiteFile } from './ftp/clients.ts';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

describe(`issue 12 small fixes (${dbKind})`, function () {
  this.timeout(600_000);
  let gw: TestGateway;

  before(async () => {
    gw = await startFtpGateway({
      ports: { webdav: 0 },
      // A real bcrypt cost, so skipping it on one path shows in the timing.
      accounts: { bcrypt_rounds: 10 },
      lockout: { ip_max_failures: 10_000 },
    });
    await createFtpUser(gw.core, 'carol');
    await createFtpUser(gw.core, 'locky');
  });
  after(() => gw?.stop());

  const session = async (username: string, password: string) => {
    const started = process.hrtime.bigint();
    const r = await gw.request('POST', '/api/rest/v1/sessions', { body: { username, password } });
    return { type: r.json?.type as string, ms: Number(process.hrtime.bigint() - started) / 1e6 };
  };

  describe('locked-out user and unknown name', () => {
    it('an unknown name is locked out after the same failures as a user, with the same answers', async () => {
      for (const username of ['locky', 'nobody-here']) {
        for (let i = 0; i < 5; i++)
          expect((await session(username, `wrong-${i}`)).type, `${username} #${i}`).to.equal(
            'not-authenticated/invalid-username-or-password',
          );
        expect((await session(username, PASSWORD)).type, username).to.equal('not-authenticated/locked-out');
      }
      // The Action log keeps the truth for the admin: the unknown name is username_not_found.
      const failed = await actions(gw.core, { action: 'failedlogin', username: 'nobody-here' });
      expect(failed.map((a) => a.failure_type)).to.deep.equal(Array(6).fill('username_not_found'));
    });

    it('a locked-out user takes as long to answer as an unknown name (medians of 20 within 2x)', async () => {
      const locked: number[] = [];
      const unknown: number[] = [];
      const lockedUnknown: number[] = [];
      for (let i = 0; i < 20; i++) {
        const a = await session('locky', PASSWORD);
        expect(a.type).to.equal('not-authenticated/locked-out');
        locked.push(a.ms);
        const b = await session(`ghost-${i}`, PASSWORD);
        expect(b.type).to.equal('not-authenticated/invalid-username-or-password');
        unknown.push(b.ms);
        const c = await session('nobody-here', PASSWORD);
        expect(c.type).to.equal('not-authenticated/locked-out');
        lockedUnknown.push(c.ms);
      }
      // Before the fix: locked-out in ~5 ms, an unknown name after bcrypt (~50 ms at cost 10).
      const ratio = median(locked) / median(unknown);
      const lockedRatio = median(locked) / median(lockedUnknown);
      expect(ratio, `locked ${median(locked)} ms vs unknown ${median(unknown)} ms`).to.be.within(0.5, 2);
      expect(lockedRatio, `locked user vs locked unknown name`).to.be.within(0.5, 2);
    });

    it('lftp stops at a locked-out 530 instead of retrying it', async () => {
      await createFtpUser(gw.core, 'lockftp');
      for (let i = 0; i < 5; i++)
        await lftp(gw, 'explicit', 'lockftp', 'ls', { password: `wrong-${i}`, timeoutMs: 20_000 });
      const before = (await actions(gw.core, { action: 'failedlogin', username: 'lockftp' })).length;
      // lftp's default ftp:retry-530 retries a 530 whose text says "too many" or "try again later"
      // (the old text said both); with 5 retries a second apart the old reply made 6 attempts.
      const r = await lftp(gw, 'explicit', 'lockftp', 'ls', {
        extra:
          'set net:max-retries 5; set net:reconnect-interval-base 1; set net:reconnect-interval-multiplier 1',
        timeoutMs: 60_000,
      });
      expect(r.code).to.not.equal(0);
      expect(r.stderr).to.match(/locked out/);
      const after = await actions(gw.core, { action: 'failedlogin', username: 'lockftp' });
      expect(after.slice(before).map((a) => a.failure_type)).to.deep.equal(['locked_out']);
    });
  });

  describe('the per-address limit on failed logins', () => {
    let limited: TestGateway;
    before(async () => {
      limited = await startFtpGateway({ lockout: { ip_max_failures: 3 } });
      await createFtpUser(limited.core, 'ipuser');
    });
    after(() => limited?.stop());

    it('answers FTP with a 530 that lftp does not retry (the old 421 it retried net:max-retries times)', async () => {
      // From 127.0.0.6, so no other test's address is refused.
      const bind = 'set net:socket-bind-ipv4 127.0.0.6';
      for (let i = 0; i < 3; i++)
        await lftp(limited, 'explicit', `guess-${i}`, 'ls', {
          password: 'wrong',
          extra: bind,
          timeoutMs: 20_000,
        });
      const started = Date.now();
      const r = await lftp(limited, 'explicit', 'ipuser', 'ls', {
        extra: `${bind}; set net:max-retries 5; set net:reconnect-interval-base 1; set net:reconnect-interval-multiplier 1; debug 9`,
        timeoutMs: 60_000,
      });
      expect(r.code).to.not.equal(0);
      expect(r.stderr).to.include(
        'Login failed: 530 Logins from this address are refused for up to 15 minutes after repeated failed logins',
      );
      expect(r.stderr.match(/---> PASS/g) ?? [], r.stderr.slice(-2000)).to.have.length(1);
      expect(r.stderr).to.not.match(/matched ftp:retry-530/);
      expect(Date.now() - started).to.be.below(10_000);
      // Another address still logs in.
      const other = await lftp(limited, 'explicit', 'ipuser', 'ls', { timeoutMs: 20_000 });
      expect(other.code, other.stderr).to.equal(0);
    });
  });

  describe('WebDAV Destination on another host', () => {
    const dav = (method: string, urlPath: string, headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const ca = readFileSync(path.join(gw.config.data_dir, 'tls', 'cert.pem'));
        const auth = Buffer.from(`carol:${PASSWORD}`).toString('base64');
        const req = https.request(
          {
            host: '127.0.0.1',
            port: gw.ports.webdav,
            method,
            path: urlPath,
            ca,
            servername: 'localhost',
            headers: { Authorization: `Basic ${auth}`, ...headers },
          },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          },
        );
        req.on('error', reject);
        req.end();
      });

    it('COPY and MOVE to another host are 502 and change nothing; the same host works', async () => {
      await writeSiteFile(gw.core, 'home/carol/src.txt', 'hello');
      const self = `127.0.0.1:${gw.ports.webdav}`;
      for (const method of ['COPY', 'MOVE']) {
        for (const other of [
          `https://other.example${':' + gw.ports.webdav}/dst.txt`,
          `https://127.0.0.2:${gw.ports.webdav}/dst.txt`,
        ])
          expect(await dav(method, '/src.txt', { Destination: other }), `${method} ${other}`).to.equal(502);
      }
      const files = gw.core.files.session(operatorPrincipal());
      const names = async () =>
        (await files.list('home/carol', { sort: 'path', direction: 'asc', offset: 0, limit: 100 }))
          .map((e) => e.path)
          .filter((p) => p.endsWith('.txt'));
      expect(await names()).to.deep.equal(['home/carol/src.txt']);
      expect(await dav('COPY', '/src.txt', { Destination: `https://${self}/copy.txt` })).to.equal(201);
      // A path-only Destination and the host in another case are the same server.
      expect(await dav('COPY', '/src.txt', { Destination: '/copy2.txt' })).to.equal(201);
      expect(
        await dav('MOVE', '/copy2.txt', { Destination: `HTTPS://127.0.0.1:${gw.ports.webdav}/moved.txt` }),
      ).to.equal(201);
      expect(await names()).to.deep.equal([
        'home/carol/copy.txt',
        'home/carol/moved.txt',
        'home/carol/src.txt',
      ]);
    });
  });

  describe('REST bodies that are not UTF-8', () => {
    const invalid = Buffer.from([0x63, 0x61, 0xff, 0x6c]); // "ca\xffl"
    const bodies: [string, string, Buffer][] = [
      [
        'JSON',
        'application/json',
        Buffer.concat([Buffer.from('{"username":"'), invalid, Buffer.from('","password":"pw-123456789"}')]),
      ],
      [
        'JSON with a lone surrogate escape',
        'application/json',
        Buffer.from('{"username":"ca\\ud800l","password":"pw-123456789"}'),
      ],
      [
        'XML',
        'application/xml',
        Buffer.concat([
          Buffer.from('<user><username>'),
          invalid,
          Buffer.from('</username><password>pw-123456789</password></user>'),
        ]),
      ],
      [
        'a form',
        'application/x-www-form-urlencoded',
        Buffer.concat([Buffer.from('username='), invalid, Buffer.from('&password=pw-123456789')]),
      ],
      [
        'a form with a percent-escape that is not UTF-8',
        'application/x-www-form-urlencoded',
        Buffer.from('username=ca%FFl&password=pw-123456789'),
      ],
    ];
    for (const [name, type, body] of bodies) {
      it(`${name}: 400 bad-request/invalid-input-encoding, and no user is made`, async () => {
        const r = await gw.request('POST', '/api/rest/v1/users', {
          headers: { 'X-SvcAPI-Key': gw.siteKey, 'Content-Type': type },
          body,
        });
        expect(r.status, r.text).to.equal(400);
        expect(r.json.type).to.equal('bad-request/invalid-input-encoding');
      });
    }

    it('valid UTF-8 in every format still makes the user', async () => {
      const r = await gw.request('POST', '/api/rest/v1/users', {
        headers: { 'X-SvcAPI-Key': gw.siteKey, 'Content-Type': 'application/x-www-form-urlencoded' },
        body: Buffer.from('username=caf%C3%A9&password=pw-123456789'),
      });
      expect(r.status, r.text).to.equal(201);
      expect(r.json.username).to.equal('café');
      const users = (
        await gw.request('GET', '/api/rest/v1/users', { headers: { 'X-SvcAPI-Key': gw.siteKey } })
      ).json;
      expect(users.map((u: { username: string }) => u.username)).to.not.include('ca\ufffdl');
    });
  });

  describe('a signed download URL and the delete of its file', () => {
    const key = () => ({ 'X-SvcAPI-Key': gw.siteKey });
    const fetchUrl = async (url: string) => {
      const u = new URL(url);
      return gw.request('GET', u.pathname + u.search);
    };

    it('a URL handed out before the delete still downloads the file while it is valid', async () => {
      await writeSiteFile(gw.core, 'home/carol/kept.txt', 'kept bytes');
      const r = await gw.request('GET', '/api/rest/v1/files/home/carol/kept.txt', { headers: key() });
      expect(r.status, r.text).to.equal(200);
      const url = r.json.download_uri as string;
      expect(
        (await gw.request('DELETE', '/api/rest/v1/files/home/carol/kept.txt', { headers: key() })).status,
      ).to.equal(200);
      await filesOf(gw.core).blobs.idle();
      const d = await fetchUrl(url);
      expect(d.status).to.equal(200);
      expect(d.text).to.equal('kept bytes');
    });

    it('under disk pressure (setting) the bytes are freed at once and the URL is 404', async () => {
      // 100 %: any file system has less free space than that, so the gateway is always under pressure.
      const tight = await startFtpGateway({ storage: { reclaim_at_once_below_free_percent: 100 } });
      try {
        await writeSiteFile(tight.core, 'gone.txt', 'gone bytes');
        const k = { 'X-SvcAPI-Key': tight.siteKey };
        const r = await tight.request('GET', '/api/rest/v1/files/gone.txt', { headers: k });
        const u = new URL(r.json.download_uri as string);
        expect(
          (await tight.request('DELETE', '/api/rest/v1/files/gone.txt', { headers: k })).status,
        ).to.equal(200);
        await filesOf(tight.core).blobs.idle();
        expect((await tight.request('GET', u.pathname)).status).to.equal(404);
        expect(
          readdirSync(path.join(tight.config.data_dir, 'blobs'), { recursive: true }).filter((n) =>
            /^[0-9a-f]{2}\/[0-9a-f]+$/.test(String(n)),
          ),
        ).to.deep.equal([]);
      } finally {
        await tight.stop();
      }
    });
  });

  // One database: the race is in the FTP data layer, not in the database, and each pass of 1,000
  // FTPS downloads takes over a minute on TLS 1.3; SQLite's run covers it.
  (dbKind === 'sqlite' ? describe : describe.skip)('1,000 small FTPS downloads with lftp', () => {
    before(async () => {
      await gw.core.namespace.mkdir(operatorPrincipal(), 'home/carol/many');
      for (let i = 0; i < 1000; i++)
        await writeSiteFile(
          gw.core,
          `home/carol/many/f${String(i).padStart(4, '0')}`,
          `file ${i}\n`.repeat(400),
        );
    });

    // lftp (GnuTLS) fetches about 19 files/s over TLS 1.3 data connections against any server
    // (vsftpd too, test/bench), so TLS 1.3 gets the first 300 files (f0000-f0299): the race showed
    // 33 times in 100 on the old code. TLS 1.2 (about 100 files/s) gets all 1,000.
    for (const [version, priority, glob, files] of [
      ['TLS 1.3', 'NORMAL:-VERS-ALL:+VERS-TLS1.3', 'many/f0[012]*', 300],
      ['TLS 1.2', 'NORMAL:-VERS-ALL:+VERS-TLS1.2', 'many/*', 1000],
    ] as const) {
      it(`${version}: ${files} files on one login, no data connection refused, pipelined commands`, async () => {
        const logins = async () => (await actions(gw.core, { action: 'login', username: 'carol' })).length;
        const before = await logins();
        const dir = mkdtempSync(path.join(os.tmpdir(), 'edges-ftps-'));
        try {
          const started = Date.now();
          // ftp:sync-mode off: lftp sends the next EPSV and RETR without waiting for the last data
          // connection's close, as queueing clients do. That is when the race showed: the late close
          // of the last TLS data connection closed the listener the next EPSV had just opened. On
          // the old code (no settled guard in protocols/ftp/data.ts) 100 files gave 33 × 425, 12
          // refused data connections and 14 logins in 87 s (6 s with the guard). A refused data
          // connection makes lftp retry after 2 s or log in again: allowed here, and counted.
          const r = await lftp(gw, 'explicit', 'carol', `lcd ${dir}; mget ${glob}`, {
            extra: `set ssl:priority "${priority}"; set ftp:sync-mode off; set net:max-retries 20; set net:reconnect-interval-base 1; debug 9`,
            timeoutMs: 240_000,
          });
          const seconds = (Date.now() - started) / 1000;
          const count = (re: RegExp) => (r.stderr.match(re) ?? []).length;
          const tally = `${seconds} s, 425: ${count(/^<--- 425/gm)}, refused: ${count(/refused/gi)}, PASS: ${count(/^---> PASS/gm)}`;
          expect(r.code, `${tally}\n${r.stderr.slice(-1500)}`).to.equal(0);
          expect(count(/^<--- 4\d\d/gm), tally).to.equal(0);
          expect(count(/Connection refused/g), tally).to.equal(0);
          expect(count(/^---> PASS/gm), tally).to.equal(1);
          expect(readdirSync(dir)).to.have.length(files);
          const last = files - 1;
          expect(readFileSync(path.join(dir, `f${String(last).padStart(4, '0')}`), 'utf8')).to.equal(
            `file ${last}\n`.repeat(400),
          );
          expect(await logins(), `logins for ${files} downloads`).to.equal(before + 1);
          // About 15 files/s on TLS 1.3 and 100 on TLS 1.2 here; the old code took a second or two
          // per refused transfer.
          expect(seconds, tally).to.be.below(180);
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      });
    }
  });
});
