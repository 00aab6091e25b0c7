import { expect } from 'chai';
import https from 'node:https';
import { readFileSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { operatorPrincipal } from '../../../src/core/index.ts';
import { dbKind } from '../../helpers/gateway.ts';
import { hrefs, lockBody, propfindBody, startDav, type DavFixture } from './fixture.ts';
import { dbOf } from '../../helpers/internals.ts';
import { queriesDuring } from '../../helpers/plans.ts';

describe(`WebDAV front end (${dbKind})`, () => {
  let f: DavFixture;
  before(async () => {
    f = await startDav();
  });
  after(async () => {
    await f?.stop();
  });

  describe('OPTIONS and authentication', () => {
    it('answers OPTIONS / with DAV: 1, 2 and MS-Author-Via without credentials (Windows)', async () => {
      const r = await f.dav('OPTIONS', '/', {
        auth: null,
        headers: { 'User-Agent': 'Microsoft-WebDAV-MiniRedir/10.0' },
      });
      expect(r.status).to.equal(200);
      expect(r.headers.dav).to.equal('1, 2');
      expect(r.headers['ms-author-via']).to.equal('DAV');
      expect(String(r.headers.allow)).to.include('PROPFIND');
    });

    it('asks for Basic credentials, and refuses a wrong password', async () => {
      const r = await f.dav('PROPFIND', '/', { auth: null, headers: { Depth: '0' } });
      expect(r.status).to.equal(401);
      expect(String(r.headers['www-authenticate'])).to.match(/^Basic realm=/);
      const bad = await f.dav('PROPFIND', '/', { auth: ['alice', 'wrong'], headers: { Depth: '0' } });
      expect(bad.status).to.equal(401);
    });

    it('records one login per client session, not per request, with interface dav', async () => {
      const op = operatorPrincipal();
      await f.gw.core.users.create(op, {
        username: 'carol',
        password: 'carol-password-1',
        user_root: 'home/alice/',
      });
      await f.gw.core.permissions.create(op, {
        username: 'carol',
        path: 'home/alice',
        permission: 'readonly',
      });
      for (let i = 0; i < 4; i++) {
        const r = await f.dav('PROPFIND', '/', {
          auth: ['carol', 'carol-password-1'],
          headers: { Depth: '0' },
        });
        expect(r.status).to.equal(207);
      }
      const logins = (await f.actions()).filter((a) => a.username === 'carol' && a.action === 'login');
      expect(logins).to.have.length(1);
      expect(logins[0]!.interface).to.equal('dav');
      const failed = (await f.actions()).filter((a) => a.action === 'failedlogin' && a.username === 'alice');
      expect(failed.length).to.be.greaterThan(0);
      expect(failed.every((a) => a.interface === 'dav')).to.be.true;
    });

    it('accepts an API key as the username and records no login', async () => {
      const before = (await f.actions()).length;
      const r = await f.dav('PROPFIND', '/', { auth: [f.gw.siteKey, 'x'], headers: { Depth: '0' } });
      expect(r.status).to.equal(207);
      expect((await f.actions()).slice(before).filter((a) => a.action === 'login')).to.have.length(0);
      // The whole site's root, as a site admin mounts it: every lock below it is read (this was 500).
      const all = await f.dav('PROPFIND', '/', { auth: [f.gw.siteKey, 'x'], headers: { Depth: '1' } });
      expect(all.status, all.text).to.equal(207);
      expect(all.text).to.include('<D:href>/</D:href>');
    });
  });

  describe('PROPFIND', () => {
    it("reports quota properties (RFC 4331): used bytes and the blob store's free space", async () => {
      expect((await f.dav('PUT', '/quota.bin', { body: Buffer.alloc(1000) })).status).to.equal(201);
      const r = await f.dav('PROPFIND', '/', {
        headers: { Depth: '0' },
        body: propfindBody('quota-available-bytes', 'quota-used-bytes'),
      });
      expect(r.status).to.equal(207);
      const used = Number(/<D:quota-used-bytes>(\d+)</.exec(r.text)?.[1]);
      const available = Number(/<D:quota-available-bytes>(\d+)</.exec(r.text)?.[1]);
      expect(used).to.be.at.least(1000);
      const disk = await statfs(f.gw.config.data_dir);
      // The free space of the disk the local blob store writes to, give or take other writers.
      expect(available).to.be.closeTo(disk.bavail * disk.bsize, 64 * 1024 * 1024);
    });

    it('refuses Depth infinity (and no Depth) with propfind-finite-depth', async () => {
      for (const headers of [{ Depth: 'infinity' }, {}] as Record<string, string>[]) {
        const r = await f.dav('PROPFIND', '/', { headers });
        expect(r.status).to.equal(403);
        expect(r.text).to.include('propfind-finite-depth');
      }
    });

    it('answers a bad Depth, malformed XML, a DOCTYPE and a huge body with a clear 4xx', async () => {
      expect((await f.dav('PROPFIND', '/', { headers: { Depth: '2' } })).status).to.equal(400);
      expect(
        (
          await f.dav('PROPFIND', '/', {
            headers: { Depth: '0' },
            body: '<D:propfind xmlns:D="DAV:"><D:prop>',
          })
        ).status,
      ).to.equal(400);
      const bomb =
        '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>';
      expect((await f.dav('PROPFIND', '/', { headers: { Depth: '0' }, body: bomb })).status).to.equal(400);
      const huge = `<D:propfind xmlns:D="DAV:"><D:prop>${'<D:x/>'.repeat(400_000)}</D:prop></D:propfind>`;
      expect((await f.dav('PROPFIND', '/', { headers: { Depth: '0' }, body: huge })).status).to.equal(413);
      expect(
        (await f.dav('PROPFIND', '/', { headers: { Depth: '0' }, body: '<x:propfind xmlns:x=""/>' })).status,
      ).to.equal(400);
      // still serving
      expect((await f.dav('PROPFIND', '/', { headers: { Depth: '0' } })).status).to.equal(207);
    });

    it('percent-encodes each href segment: #, %, ?, spaces and Unicode; collections end with /', async () => {
      expect((await f.dav('MKCOL', '/names')).status).to.equal(201);
      const names = ['a#b.txt', '100%.txt', 'what?.txt', 'with space.txt', 'ünïcødé ß.txt', '日本.txt'];
      for (const n of names) {
        const r = await f.dav('PUT', `/names/${encodeURIComponent(n)}`, { body: n });
        expect(r.status, n).to.equal(201);
      }
      await f.dav('MKCOL', `/names/${encodeURIComponent('sub #1')}`);
      const r = await f.dav('PROPFIND', '/names/', {
        headers: { Depth: '1' },
        body: propfindBody('resourcetype'),
      });
      const listed = hrefs(r.text);
      expect(listed).to.include('/names/');
      expect(listed).to.include('/names/sub%20%231/');
      for (const n of names) expect(listed).to.include(`/names/${encodeURIComponent(n)}`);
      for (const h of listed.filter((x) => !x.endsWith('/'))) {
        const got = await f.dav('GET', h);
        expect(got.status, h).to.equal(200);
        expect(got.text).to.equal(decodeURIComponent(h.slice('/names/'.length)));
      }
    });

    it('streams a large Depth 1 folder compactly', async function () {
      // 600 files written one by one: 10 s on PostgreSQL alone, past 20 s beside the other pass.
      this.timeout(90_000);
      await f.dav('MKCOL', '/many');
      const session = f.gw.core.files.session(operatorPrincipal());
      const { Readable } = await import('node:stream');
      for (let i = 0; i < 600; i++)
        await session.write(`home/alice/many/f${i}.txt`, Readable.from([Buffer.from('x')]));
      const r = await f.dav('PROPFIND', '/many/', { headers: { Depth: '1' } });
      expect(r.status).to.equal(207);
      expect(hrefs(r.text)).to.have.length(601);
      // Windows' limit is about 1 MB per folder; an entry stays well under 500 bytes.
      expect(r.body.length / 601).to.be.below(500);
    });
  });

  describe('GET, HEAD and PUT', () => {
    it("answers 405 with an Allow of the target's own methods: a folder's PUT; MKCOL on what exists", async () => {
      expect((await f.dav('MKCOL', '/allow-dir')).status).to.equal(201);
      expect((await f.dav('PUT', '/allow.txt', { body: 'x' })).status).to.equal(201);
      const methods = (r: { headers: Record<string, unknown> }) =>
        String(r.headers.allow).split(/,\s*/).sort();
      const folder = [
        'COPY',
        'DELETE',
        'GET',
        'HEAD',
        'LOCK',
        'MOVE',
        'OPTIONS',
        'PROPFIND',
        'PROPPATCH',
        'UNLOCK',
      ];
      for (const method of ['PUT', 'MKCOL'] as const) {
        const r = await f.dav(method, '/allow-dir');
        expect(r.status, method).to.equal(405);
        // A client told PUT on a folder is not allowed must not be told in the same answer it is.
        expect(methods(r), method).to.deep.equal(folder);
      }
      const file = await f.dav('MKCOL', '/allow.txt');
      expect(file.status).to.equal(405);
      expect(methods(file)).to.deep.equal([...folder, 'PUT'].sort());
      const unknown = await f.dav('PATCH', '/allow.txt');
      expect(unknown.status).to.equal(405);
      expect(methods(unknown)).to.include('MKCOL');
    });

    it('answers GET and HEAD on a folder with a page listing it, names escaped, page after page', async function () {
      this.timeout(90_000); // many files written one by one, as above
      expect((await f.dav('MKCOL', '/index-dir')).status).to.equal(201);
      expect((await f.dav('MKCOL', '/index-dir/sub')).status).to.equal(201);
      const odd = '<b>&"x y\'#?.txt';
      expect((await f.dav('PUT', `/index-dir/${encodeURIComponent(odd)}`, { body: 'abc' })).status).to.equal(
        201,
      );
      // More than one page of the listing (500 entries a page).
      for (let i = 0; i < 520; i += 20)
        await Promise.all(
          Array.from({ length: 20 }, (_, j) =>
            f.dav('PUT', `/index-dir/f${String(i + j).padStart(4, '0')}`, { body: 'x' }),
          ),
        );
      // Without its slash, a folder's address is sent to the one with it (relative links resolve there).
      const moved = await f.dav('GET', '/index-dir');
      expect(moved.status).to.equal(301);
      expect(moved.headers.location).to.equal('./index-dir/');
      expect((await f.dav('HEAD', '/index-dir/sub')).headers.location).to.equal('./sub/');
      const head = await f.dav('HEAD', '/index-dir/');
      expect(head.status).to.equal(200);
      expect(head.headers['content-type']).to.equal('text/html; charset=utf-8');
      expect(head.text).to.equal('');
      const page = await f.dav('GET', '/index-dir/', { headers: { Range: 'bytes=0-1' } });
      expect(page.status).to.equal(200);
      expect(page.headers['content-security-policy']).to.equal("default-src 'none'");
      const links = [...page.text.matchAll(/<a href="([^"]*)">([^<]*)<\/a>/g)].map((m) => [m[1], m[2]]);
      expect(links[0]).to.deep.equal(['../', '../']);
      expect(links).to.deep.include(['sub/', 'sub/']);
      expect(links).to.deep.include([encodeURIComponent(odd), '&lt;b&gt;&amp;&quot;x y&apos;#?.txt']);
      expect(links.filter(([h]) => /^f\d{4}$/.test(h!))).to.have.length(520);
      expect(page.text).to.not.include('<b>');
      expect(page.text.trimEnd()).to.match(/<\/html>$/);
      // The links lead where they say.
      expect((await f.dav('GET', `/index-dir/${encodeURIComponent(odd)}`)).text).to.equal('abc');
      const root = await f.dav('GET', '/');
      expect(root.text).to.include('<a href="index-dir/">index-dir/</a>');
      expect(root.text).to.not.include('href="../"');
      // A folder that is not there is still 404, and a file is still its bytes.
      expect((await f.dav('GET', '/index-dir/nothing/')).status).to.equal(404);
      expect((await f.dav('GET', '/allow.txt')).text).to.equal('x');
    });

    it('serves byte ranges, ETag and Last-Modified, with 304, 412 and 416', async () => {
      const data = Buffer.from('0123456789abcdefghij');
      expect((await f.dav('PUT', '/range.txt', { body: data })).status).to.equal(201);
      const full = await f.dav('GET', '/range.txt');
      expect(full.status).to.equal(200);
      const etag = String(full.headers.etag);
      expect(etag).to.match(/^".+"$/);
      expect(full.headers['last-modified']).to.be.a('string');
      const part = await f.dav('GET', '/range.txt', { headers: { Range: 'bytes=5-9' } });
      expect(part.status).to.equal(206);
      expect(part.text).to.equal('56789');
      expect(part.headers['content-range']).to.equal('bytes 5-9/20');
      const tail = await f.dav('GET', '/range.txt', { headers: { Range: 'bytes=-3' } });
      expect(tail.text).to.equal('hij');
      const bad = await f.dav('GET', '/range.txt', { headers: { Range: 'bytes=50-60' } });
      expect(bad.status).to.equal(416);
      expect(bad.headers['content-range']).to.equal('bytes */20');
      expect((await f.dav('GET', '/range.txt', { headers: { 'If-None-Match': etag } })).status).to.equal(304);
      expect((await f.dav('GET', '/range.txt', { headers: { 'If-Match': '"nope"' } })).status).to.equal(412);
      const head = await f.dav('HEAD', '/range.txt');
      expect(head.status).to.equal(200);
      expect(head.headers['content-length']).to.equal('20');
      expect(head.text).to.equal('');
    });

    it('keeps the old content when the client aborts a PUT', async () => {
      await f.dav('PUT', '/abort.txt', { body: 'old content' });
      await new Promise<void>((resolve) => {
        const req = https.request({
          host: '127.0.0.1',
          port: f.port,
          method: 'PUT',
          path: '/abort.txt',
          ca: readFileSync(f.certFile),
          servername: 'localhost',
          headers: {
            'Content-Length': String(10 * 1024 * 1024),
            Authorization: `Basic ${Buffer.from('alice:alice-password-1').toString('base64')}`,
          },
        });
        req.on('error', () => resolve());
        req.write(Buffer.alloc(256 * 1024, 1));
        setTimeout(() => {
          req.destroy();
          resolve();
        }, 300);
      });
      await new Promise((r) => setTimeout(r, 300));
      const got = await f.dav('GET', '/abort.txt');
      expect(got.text).to.equal('old content');
    });

    it('refuses traversal through encoded segments with 400', async () => {
      for (const p of ['/%2e%2e/home', '/a%2fb', '/x/%2E%2E/%2e%2e/etc', '/%2e/x', '/bad%ff']) {
        expect((await f.dav('GET', p)).status, p).to.equal(400);
      }
      const r = await f.dav('COPY', '/range.txt', { headers: { Destination: `${f.url}/%2e%2e/evil.txt` } });
      expect(r.status).to.equal(400);
    });
  });

  describe('COPY, MOVE, MKCOL, DELETE', () => {
    it('answers 201/204 and 412 on Overwrite: F', async () => {
      await f.dav('PUT', '/cm-a.txt', { body: 'a' });
      await f.dav('PUT', '/cm-b.txt', { body: 'b' });
      expect((await f.dav('PUT', '/cm-b.txt', { body: 'b2' })).status).to.equal(204);
      expect(
        (await f.dav('COPY', '/cm-a.txt', { headers: { Destination: `${f.url}/cm-c.txt` } })).status,
      ).to.equal(201);
      expect((await f.dav('COPY', '/cm-a.txt', { headers: { Destination: '/cm-b.txt' } })).status).to.equal(
        204,
      );
      const refused = await f.dav('MOVE', '/cm-a.txt', {
        headers: { Destination: '/cm-c.txt', Overwrite: 'F' },
      });
      expect(refused.status).to.equal(412);
      expect((await f.dav('MOVE', '/cm-a.txt', { headers: { Destination: '/cm-d.txt' } })).status).to.equal(
        201,
      );
      expect(
        (await f.dav('MOVE', '/cm-d.txt', { headers: { Destination: '/no/such/x.txt' } })).status,
      ).to.equal(409);
      expect((await f.dav('MKCOL', '/cm-dir')).status).to.equal(201);
      expect((await f.dav('MKCOL', '/cm-dir')).status).to.equal(405);
      expect((await f.dav('MKCOL', '/none/cm-dir')).status).to.equal(409);
      expect((await f.dav('DELETE', '/cm-dir')).status).to.equal(204);
      expect((await f.dav('DELETE', '/cm-dir')).status).to.equal(404);
    });

    it('deletes a file whatever its Depth (lftp sends 0); a folder only at Depth infinity', async () => {
      await f.dav('MKCOL', '/depth-dir');
      await f.dav('PUT', '/depth-dir/f.txt', { body: 'f' });
      const folder = await f.dav('DELETE', '/depth-dir', { headers: { Depth: '0' } });
      expect(folder.status).to.equal(400);
      expect((await f.dav('GET', '/depth-dir/f.txt')).text).to.equal('f');
      expect((await f.dav('DELETE', '/depth-dir/f.txt', { headers: { Depth: '0' } })).status).to.equal(204);
      expect((await f.dav('GET', '/depth-dir/f.txt')).status).to.equal(404);
      expect((await f.dav('DELETE', '/depth-dir', { headers: { Depth: 'infinity' } })).status).to.equal(204);
    });
  });

  describe('locks and properties', () => {
    it('enforces a lock on every write until its token is submitted, and releases it', async () => {
      await f.dav('PUT', '/locked.txt', { body: 'v1' });
      const l = await f.dav('LOCK', '/locked.txt', { headers: { Timeout: 'Second-600' }, body: lockBody() });
      expect(l.status).to.equal(200);
      const token = /^<(.+)>$/.exec(String(l.headers['lock-token']))![1]!;
      expect(token).to.match(/^urn:uuid:/);
      expect(l.text).to.include('Second-');
      expect((await f.dav('PUT', '/locked.txt', { body: 'v2' })).status).to.equal(423);
      expect((await f.dav('DELETE', '/locked.txt')).status).to.equal(423);
      expect((await f.dav('LOCK', '/locked.txt', { body: lockBody() })).status).to.equal(423);
      expect(
        (await f.dav('PUT', '/locked.txt', { body: 'v2', headers: { If: `(<${token}>)` } })).status,
      ).to.equal(204);
      // The lock is in the database, where every instance reads it.
      const rows = await dbOf(f.gw.core).read((em) => em.query('SELECT token FROM dav_locks'));
      expect(rows.map((r: { token: string }) => r.token)).to.include(token);
      expect(
        (await f.dav('UNLOCK', '/locked.txt', { headers: { 'Lock-Token': '<urn:uuid:bogus>' } })).status,
      ).to.equal(409);
      expect(
        (await f.dav('UNLOCK', '/locked.txt', { headers: { 'Lock-Token': `<${token}>` } })).status,
      ).to.equal(204);
      expect((await f.dav('PUT', '/locked.txt', { body: 'v3' })).status).to.equal(204);
    });

    it("answers every write under a folder's lock with 423 naming the folder (lock-token-submitted), changing nothing", async () => {
      await f.dav('MKCOL', '/held');
      await f.dav('PUT', '/held/a.txt', { body: 'a' });
      await f.dav('PUT', '/free.txt', { body: 'free' });
      const l = await f.dav('LOCK', '/held', {
        headers: { Timeout: 'Second-600', Depth: 'infinity' },
        body: lockBody(),
      });
      expect(l.status).to.equal(200);
      const token = /^<(.+)>$/.exec(String(l.headers['lock-token']))![1]!;
      const patch =
        '<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:x"><D:set><D:prop>' +
        '<Z:color>red</Z:color></D:prop></D:set></D:propertyupdate>';
      const refused = [
        await f.dav('PUT', '/held/a.txt', { body: 'changed' }),
        await f.dav('PUT', '/held/new.txt', { body: 'new' }),
        await f.dav('MKCOL', '/held/sub'),
        await f.dav('PROPPATCH', '/held/a.txt', { body: patch }),
        await f.dav('DELETE', '/held/a.txt'),
        await f.dav('DELETE', '/held'),
        await f.dav('MOVE', '/held/a.txt', { headers: { Destination: '/moved.txt' } }),
        await f.dav('COPY', '/free.txt', { headers: { Destination: '/held/free.txt' } }),
      ];
      for (const r of refused) {
        expect(r.status, r.text).to.equal(423);
        expect(r.text).to.match(/<D:lock-token-submitted><D:href>\/held<\/D:href><\/D:lock-token-submitted>/);
      }
      const listing = await f.dav('PROPFIND', '/held', { headers: { Depth: '1' } });
      expect(listing.text).to.include('/held/a.txt').and.not.include('new.txt').and.not.include('/held/sub');
      expect(listing.text).not.to.include('free.txt');
      expect((await f.dav('GET', '/held/a.txt')).text).to.equal('a');
      expect((await f.dav('GET', '/moved.txt')).status).to.equal(404);
      const props = await f.dav('PROPFIND', '/held/a.txt', { headers: { Depth: '0' } });
      expect(props.text).not.to.include('red');
      // With the token the same writes go through.
      const If = `(<${token}>)`;
      expect((await f.dav('PUT', '/held/a.txt', { body: 'changed', headers: { If } })).status).to.equal(204);
      expect((await f.dav('PROPPATCH', '/held/a.txt', { body: patch, headers: { If } })).status).to.equal(
        207,
      );
      expect((await f.dav('UNLOCK', '/held', { headers: { 'Lock-Token': `<${token}>` } })).status).to.equal(
        204,
      );
    });

    it("a PUT reads the file's row, its locks and the user's cut upload once before the body, not once per check", async () => {
      await f.dav('PUT', '/counted-warm.txt', { body: 'warm' });
      const statements = await queriesDuring(f.gw.core, async () => {
        expect((await f.dav('PUT', '/counted.txt', { body: 'new' })).status).to.equal(201);
      });
      const count = (re: RegExp) => statements.filter((s) => re.test(s.query)).length;
      // Once before the body (the upload's open), once in its commit, which checks again.
      expect(count(/FROM "?files"? .*WHERE .*path/i), 'files').to.equal(2);
      expect(count(/FROM "?dav_locks"?/i), 'dav_locks').to.equal(2);
      expect(count(/SELECT .*FROM "?pending_versions"?/i), 'pending_versions').to.equal(1);
      // The new blob's record and its removal at the commit: one statement each on PostgreSQL.
      const blobRecord = count(/^(WITH .*)?(INSERT INTO|DELETE FROM) "?blob_(leases|garbage)"?/i);
      expect(blobRecord).to.equal(dbKind === 'postgres' ? 2 : 4);
    });

    it('rejects malformed If headers with 400 and unmet ones with 412', async () => {
      for (const h of ['(<urn:x', 'garbage', '()', '<http://x/a>']) {
        expect((await f.dav('PUT', '/locked.txt', { body: 'x', headers: { If: h } })).status, h).to.equal(
          400,
        );
      }
      expect(
        (await f.dav('PUT', '/locked.txt', { body: 'x', headers: { If: '(["nope"])' } })).status,
      ).to.equal(412);
    });

    it('creates a lock-null resource as an empty file', async () => {
      const l = await f.dav('LOCK', '/lock-null.txt', { body: lockBody() });
      expect(l.status).to.equal(201);
      const got = await f.dav('GET', '/lock-null.txt');
      expect(got.status).to.equal(200);
      expect(got.text).to.equal('');
    });

    it("lists the dead properties of a folder's children in a Depth 1 PROPFIND, and only theirs", async () => {
      const set = (value: string) =>
        `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="http://ex/"><D:set><D:prop><Z:color>${value}</Z:color></D:prop></D:set></D:propertyupdate>`;
      for (const folder of ['/dp', '/dp/sub', '/dp-none'])
        expect((await f.dav('MKCOL', folder)).status).to.equal(201);
      for (const file of ['/dp/a.txt', '/dp/b.txt', '/dp/sub/deep.txt', '/dp-none/x.txt', '/dp-top.txt'])
        expect((await f.dav('PUT', file, { body: 'x' })).status).to.equal(201);
      /** colorsIn is each child's color in a listing of `folder` (allprop, as Explorer asks), by href. */
      const colorsIn = async (folder: string) => {
        const r = await f.dav('PROPFIND', folder, { headers: { Depth: '1' } });
        expect(r.status, r.text).to.equal(207);
        const out: Record<string, string | null> = {};
        for (const part of r.text.split('<D:response>').slice(1)) {
          const href = /<D:href>([^<]*)<\/D:href>/.exec(part)![1]!;
          out[href] = /<color xmlns="http:\/\/ex\/">([^<]*)<\/color>/.exec(part)?.[1] ?? null;
        }
        return out;
      };
      // Only a grandchild has one: the listing of /dp shows none.
      expect((await f.dav('PROPPATCH', '/dp/sub/deep.txt', { body: set('deep') })).status).to.equal(207);
      expect(await colorsIn('/dp')).to.deep.equal({
        '/dp/': null,
        '/dp/a.txt': null,
        '/dp/b.txt': null,
        '/dp/sub/': null,
      });
      expect((await colorsIn('/dp/sub'))['/dp/sub/deep.txt']).to.equal('deep');
      expect((await f.dav('PROPPATCH', '/dp/b.txt', { body: set('blue') })).status).to.equal(207);
      expect((await f.dav('PROPPATCH', '/dp', { body: set('folder') })).status).to.equal(207);
      expect(await colorsIn('/dp')).to.deep.equal({
        '/dp/': 'folder',
        '/dp/a.txt': null,
        '/dp/b.txt': 'blue',
        '/dp/sub/': null,
      });
      expect(await colorsIn('/dp-none')).to.deep.equal({ '/dp-none/': null, '/dp-none/x.txt': null });
      // The user's root (a folder of the site) lists its children's too.
      expect((await f.dav('PROPPATCH', '/dp-top.txt', { body: set('top') })).status).to.equal(207);
      const top = await colorsIn('/');
      expect(top['/dp-top.txt']).to.equal('top');
      expect(top['/dp/']).to.equal('folder');
      expect(top['/dp-none/']).to.equal(null);
    });

    it('keeps dead properties through MOVE and drops them on DELETE', async () => {
      await f.dav('PUT', '/p.txt', { body: 'p' });
      const set = `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="http://ex/"><D:set><D:prop><Z:color>blue &amp; <Z:b>bold</Z:b></Z:color></D:prop></D:set></D:propertyupdate>`;
      expect((await f.dav('PROPPATCH', '/p.txt', { body: set })).status).to.equal(207);
      await f.dav('MOVE', '/p.txt', { headers: { Destination: '/q.txt' } });
      const ask = `<D:propfind xmlns:D="DAV:"><D:prop><color xmlns="http://ex/"/></D:prop></D:propfind>`;
      const r = await f.dav('PROPFIND', '/q.txt', { headers: { Depth: '0' }, body: ask });
      expect(r.text, r.text).to.include(
        '<color xmlns="http://ex/">blue &amp; <b xmlns="http://ex/">bold</b></color>',
      );
      await f.dav('DELETE', '/q.txt');
      await f.dav('PUT', '/q.txt', { body: 'new' });
      const again = await f.dav('PROPFIND', '/q.txt', { headers: { Depth: '0' }, body: ask });
      expect(again.text).to.include('404');
    });
  });
});
