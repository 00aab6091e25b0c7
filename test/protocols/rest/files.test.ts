/**
 * SPEC "Folders" and "Files" over real HTTPS, once on the local blob store and once on S3: folder
 * creation and listings (fields, paging, sorting, search, XML), names that need percent-encoding,
 * downloads through the signed download_uri (ETag, Range, conditional requests, tampered and
 * expired tokens), `action=stat`, and move, copy and delete of files and folder trees.
 */
import { expect } from 'chai';
import contentDisposition from 'content-disposition';
import { Signer } from '../../../src/core/files/signed.ts';
import { asList, expectError, parseXml } from './client.ts';
import {
  crc32,
  enc,
  filesFixture,
  md5,
  random,
  sleep,
  STORES,
  TEST_SECRET,
  type FileEntry,
} from './files-fixture.ts';

const ENTRY_FIELDS = ['path', 'type', 'size', 'mtime', 'crc32', 'md5'];

for (const store of STORES) {
  describe(`REST files: folders, downloads, move/copy/delete (${store} store)`, function () {
    this.timeout(30_000);
    const fx = filesFixture(store);
    const local = store === 'local';
    /** put uploads a file, creating its parent folders first (an upload needs its folder to exist). */
    const put = async (path: string, content: string | Buffer) => {
      const parent = path.slice(0, Math.max(0, path.lastIndexOf('/')));
      if (parent) {
        const r = await fx.api('POST', fx.folders(parent));
        if (r.status !== 201) expectError(r, 422, 'processing-failure/destination-exists');
      }
      return (await fx.upload(path, Buffer.isBuffer(content) ? content : Buffer.from(content))).entry;
    };
    const text = async (path: string) => (await fx.download(path)).toString();

    describe('folders', () => {
      it('POST /folders/a/b answers 201 [] and creates the missing parents', async () => {
        await fx.mkdir('fa/fb');
        expect(await fx.names('')).to.include('fa');
        const inA = await fx.list('fa');
        expect(inA.map((e) => [e.path, e.type, e.size])).to.deep.equal([['fa/fb', 'directory', null]]);
        expect(await fx.list('fa/fb')).to.deep.equal([]);
        const creates = await fx.actions({ action: 'create', path: 'fa/fb' });
        expect(creates).to.have.length(1);
        expect(creates[0]!.interface).to.equal('restapi');
      });

      it('POST on an existing folder or file is 422 destination-exists, changing nothing', async () => {
        await fx.mkdir('fexist/inner');
        await put('fexist/file.txt', 'x');
        const before = await fx.snapshot();
        for (const p of ['fexist', 'fexist/inner', 'fexist/file.txt']) {
          expectError(await fx.api('POST', fx.folders(p)), 422, 'processing-failure/destination-exists');
        }
        expect(await fx.snapshot()).to.deep.equal(before);
      });

      it('lists entries with SPEC fields: folders with size null, files with size, ISO mtime, crc32, md5', async () => {
        await fx.mkdir('flist/sub');
        const data = random(1234);
        await put('flist/data.bin', data);
        const entries = await fx.list('flist');
        expect(entries.map((e) => e.path)).to.deep.equal(['flist/data.bin', 'flist/sub']);
        for (const e of entries) {
          expect(e).to.have.all.keys(...ENTRY_FIELDS);
          expect(new Date(e.mtime).toISOString(), 'ISO 8601 mtime').to.equal(e.mtime);
        }
        const [file, folder] = entries as [FileEntry, FileEntry];
        expect(folder).to.include({ type: 'directory', size: null, crc32: null, md5: null });
        expect(file).to.include({ type: 'file', size: 1234 });
        if (local) expect(file).to.include({ md5: md5(data), crc32: crc32(data) });
        else {
          if (file.md5 !== null) expect(file.md5).to.equal(md5(data));
          if (file.crc32 !== null) expect(file.crc32).to.equal(crc32(data));
        }
        // The listing's entry is the stat of the same file.
        expect((await fx.stat('flist/data.bin')).json).to.deep.equal(file);
      });

      it('an empty path lists the root folder', async () => {
        await fx.mkdir('froot');
        for (const url of ['/folders', '/folders/']) {
          const r = await fx.api('GET', url);
          expect(r.status, r.text).to.equal(200);
          const paths = (r.json as FileEntry[]).map((e) => e.path);
          expect(paths).to.include('froot');
          expect(
            paths.every((p) => !p.includes('/')),
            'only top-level entries, no leading slash',
          ).to.be.true;
        }
      });

      it('names are case-sensitive: A.txt and a.txt are two files', async () => {
        await put('fcase/A.txt', 'upper');
        await put('fcase/a.txt', 'lower');
        expect(await fx.names('fcase')).to.have.members(['A.txt', 'a.txt']);
        expect(await text('fcase/A.txt')).to.equal('upper');
        expect(await text('fcase/a.txt')).to.equal('lower');
        expectError(
          await fx.api('POST', fx.files('fcase/A.txt'), { body: { 'move-destination': 'fcase/a.txt' } }),
          422,
          'processing-failure/destination-exists',
        );
        await fx.mkdir('fcase/Dir/x');
        await fx.mkdir('fcase/dir');
        expect(await fx.list('fcase/dir')).to.deep.equal([]);
        expect(await fx.names('fcase/Dir')).to.deep.equal(['x']);
        expectError(await fx.api('GET', fx.folders('fcase/DIR')), 404, 'not-found/folder-not-found');
      });

      it('listing a missing folder is 404 folder-not-found; listing a file 400 folder-must-not-be-a-file', async () => {
        await put('fnot/file.txt', 'f');
        expectError(await fx.api('GET', fx.folders('fnot/missing')), 404, 'not-found/folder-not-found');
        expectError(await fx.api('GET', fx.folders('nowhere/at/all')), 404, 'not-found/folder-not-found');
        expectError(
          await fx.api('GET', fx.folders('fnot/file.txt')),
          400,
          'bad-request/folder-must-not-be-a-file',
        );
      });

      describe('paging, sorting and search over 25 entries', () => {
        const names = Array.from({ length: 25 }, (_, i) => `e${String(i + 1).padStart(2, '0')}`);
        const files: Record<string, number> = { e05: 300, e13: 10, e21: 2000 };
        // Created in an order unlike the names, each in its own millisecond, so mtime order is known.
        const created = [...names].sort(
          (a, b) => ((a.charCodeAt(2) * 7) % 10) - ((b.charCodeAt(2) * 7) % 10),
        );
        const folders = names.filter((n) => !(n in files));

        before(async function () {
          this.timeout(60_000);
          await fx.mkdir('pg');
          for (const n of created) {
            if (n in files) await put(`pg/${n}`, random(files[n]!));
            else await fx.mkdir(`pg/${n}`);
            await sleep(3);
          }
        });

        it('per_page and page walk the listing without gaps or repeats', async () => {
          const pages: string[][] = [];
          for (let page = 1; page <= 4; page++) pages.push(await fx.names('pg', `?per_page=10&page=${page}`));
          expect(pages.map((p) => p.length)).to.deep.equal([10, 10, 5, 0]);
          expect(pages.flat()).to.deep.equal(names);
          expect(await fx.names('pg')).to.deep.equal(names);
          expect(await fx.names('pg', '?per_page=25')).to.deep.equal(names);
          expect(await fx.names('pg', '?per_page=7&page=4')).to.deep.equal(names.slice(21, 25));
        });

        it('sort_by[path]=desc reverses the order, also across pages', async () => {
          const reversed = [...names].reverse();
          expect(await fx.names('pg', '?sort_by[path]=desc')).to.deep.equal(reversed);
          expect(await fx.names('pg', '?sort_by%5Bpath%5D=desc&per_page=10&page=2')).to.deep.equal(
            reversed.slice(10, 20),
          );
          expect(await fx.names('pg', '?sort_by[path]=asc')).to.deep.equal(names);
        });

        it('sort_by[size] orders by size, folders counting as 0 (SPEC: size 0 for a folder)', async () => {
          const bySize = Object.keys(files).sort((a, b) => files[a]! - files[b]!);
          expect(await fx.names('pg', '?sort_by[size]=asc')).to.deep.equal([...folders, ...bySize]);
          expect(await fx.names('pg', '?sort_by[size]=desc')).to.deep.equal([
            ...[...bySize].reverse(),
            ...[...folders].reverse(),
          ]);
          const sizes = (await fx.list('pg', '?sort_by[size]=asc&per_page=10&page=3')).map((e) => e.size);
          expect(sizes).to.deep.equal([null, null, 10, 300, 2000]);
        });

        it('sort_by[modified_at_datetime] orders by mtime', async () => {
          expect(await fx.names('pg', '?sort_by[modified_at_datetime]=desc')).to.deep.equal(
            [...created].reverse(),
          );
          expect(await fx.names('pg', '?sort_by[modified_at_datetime]=asc')).to.deep.equal(created);
          expect(await fx.names('pg', '?sort_by[modified_at_datetime]=desc&per_page=5&page=2')).to.deep.equal(
            [...created].reverse().slice(5, 10),
          );
        });

        it('search keeps the names containing the text, case-insensitively', async () => {
          expect(await fx.names('pg', '?search=e1')).to.deep.equal(names.slice(9, 19));
          expect(await fx.names('pg', '?search=E2')).to.deep.equal(names.slice(19, 25));
          expect(await fx.names('pg', '?search=e1&per_page=4&page=3')).to.deep.equal(['e18', 'e19']);
          expect(await fx.names('pg', '?search=e1&sort_by[path]=desc&per_page=3')).to.deep.equal([
            'e19',
            'e18',
            'e17',
          ]);
          expect(await fx.names('pg', '?search=zzz')).to.deep.equal([]);
        });

        it('refuses per_page and page out of range, and unknown sort fields, with 400', async () => {
          for (const q of [
            'per_page=0',
            'per_page=5001',
            'page=0',
            'per_page=x',
            'sort_by[name]=asc',
            'sort_by[size]=up',
          ]) {
            const r = await fx.api('GET', fx.folders('pg', `?${q}`));
            expect(r.status, `${q}: ${r.text}`).to.equal(400);
            expect(r.json.type).to.match(/^bad-request\//);
          }
        });
      });

      it('answers XML with Accept: application/xml, SPEC typing included', async () => {
        await fx.mkdir('fxml/sub');
        await put('fxml/one.txt', 'one');
        const r = await fx.api('GET', fx.folders('fxml'), { headers: { Accept: 'application/xml' } });
        expect(r.status, r.text).to.equal(200);
        expect(r.headers['content-type']).to.match(/^application\/xml/);
        const doc = parseXml(r.text);
        const root = doc.files;
        expect(root['@_type']).to.equal('array');
        const items = asList(root.file);
        expect(items.map((i) => i.path['#text'] ?? i.path)).to.deep.equal(['fxml/one.txt', 'fxml/sub']);
        const [file, folder] = items;
        expect(file.size).to.deep.equal({ '@_type': 'integer', '#text': '3' });
        expect(file.mtime['@_type']).to.equal('datetime');
        expect(Date.parse(file.mtime['#text'])).to.be.a('number').and.not.NaN;
        expect(folder.type['#text'] ?? folder.type).to.equal('directory');
        expect(folder.size['@_nil']).to.equal('true');
        if (local) expect(file.md5['#text'] ?? file.md5).to.equal(md5(Buffer.from('one')));

        // An empty folder is SPEC's empty list; stat answers one <file>.
        const empty = await fx.api('GET', fx.folders('fxml/sub'), { headers: { Accept: 'application/xml' } });
        expect(parseXml(empty.text)['nil-classes']['@_type']).to.equal('array');
        const stat = await fx.api('GET', fx.files('fxml/one.txt', '?action=stat'), {
          headers: { Accept: 'application/xml' },
        });
        expect(stat.status, stat.text).to.equal(200);
        expect(parseXml(stat.text).file.path['#text'] ?? parseXml(stat.text).file.path).to.equal(
          'fxml/one.txt',
        );
      });
    });

    describe('names that need encoding', () => {
      const odd = [
        'with space',
        'hash#tag',
        '100% sure',
        'what?',
        'amp&eq=plus+semi;',
        "quote'paren(1)[x]",
        'ünïcødé 日本語 🎉',
        'data.json',
        'page.xml',
        'say "hi" <b>&amp;&lt;i>',
      ];

      before(async () => {
        for (const name of odd) await put(`odd dir/${name}`, `content of ${name}`);
        await fx.mkdir('odd dir/folder.json/ü #?%');
      });

      it('round-trip through upload, listing, stat and download, percent-encoded in the URL', async () => {
        const listed = await fx.list('odd dir');
        expect(listed.map((e) => e.path).sort()).to.deep.equal(
          [...odd, 'folder.json'].map((n) => `odd dir/${n}`).sort(),
        );
        for (const name of odd) {
          const stat = await fx.stat(`odd dir/${name}`);
          expect(stat.status, `${name}: ${stat.text}`).to.equal(200);
          expect(stat.json.path).to.equal(`odd dir/${name}`);
          expect(await text(`odd dir/${name}`)).to.equal(`content of ${name}`);
        }
        expect(await fx.names('odd dir/folder.json')).to.deep.equal(['ü #?%']);
        expect(await fx.list('odd dir/folder.json/ü #?%')).to.deep.equal([]);
        // Search takes %, _ and # literally.
        expect(await fx.names('odd dir', `?search=${encodeURIComponent('%')}`)).to.deep.equal(['100% sure']);
        expect(await fx.names('odd dir', `?search=${encodeURIComponent('#')}`)).to.deep.equal(['hash#tag']);
        expect(await fx.names('odd dir', '?search=_')).to.deep.equal([]);

        // The XML listing escapes what XML needs escaped.
        const xml = await fx.api('GET', fx.folders('odd dir'), { headers: { Accept: 'application/xml' } });
        expect(xml.status, xml.text).to.equal(200);
        const paths = asList(parseXml(xml.text).files.file).map((f) => f.path['#text'] ?? f.path);
        expect(paths).to.deep.equal(listed.map((e) => e.path));
      });

      it('a .json or .xml extension is part of the name; Accept picks the format', async () => {
        const json = await fx.api('GET', fx.files('odd dir/page.xml', '?action=stat'), {
          headers: { Accept: 'application/json' },
        });
        expect(json.headers['content-type']).to.match(/^application\/json/);
        expect(json.json.path).to.equal('odd dir/page.xml');
        const xml = await fx.api('GET', fx.files('odd dir/data.json', '?action=stat'), {
          headers: { Accept: 'application/xml' },
        });
        expect(xml.headers['content-type']).to.match(/^application\/xml/);
        expect(parseXml(xml.text).file.path['#text'] ?? parseXml(xml.text).file.path).to.equal(
          'odd dir/data.json',
        );
        // Without Accept: JSON.
        const dflt = await fx.gw.request(
          'GET',
          `/api/rest/v1/files/${enc('odd dir/data.json')}?action=stat`,
          {
            headers: fx.auth,
          },
        );
        expect(dflt.headers['content-type']).to.match(/^application\/json/);
        expect(dflt.json.path).to.equal('odd dir/data.json');
        // A folder named like a format lists as a folder.
        const list = await fx.api('GET', fx.folders('odd dir/folder.json'), {
          headers: { Accept: 'application/xml' },
        });
        expect(list.status, list.text).to.equal(200);
        expect(list.headers['content-type']).to.match(/^application\/xml/);
      });

      it('the download carries the name in Content-Disposition', async () => {
        for (const name of [
          'ünïcødé 日本語 🎉',
          'hash#tag',
          "quote'paren(1)[x]",
          'data.json',
          'say "hi" <b>&amp;&lt;i>',
        ]) {
          const r = await fx.transfer(await fx.downloadUri(`odd dir/${name}`));
          expect(r.status).to.equal(200);
          const cd = contentDisposition.parse(String(r.headers['content-disposition']));
          expect(cd.type).to.equal('attachment');
          expect(cd.parameters.filename).to.equal(name);
        }
      });
    });

    describe('downloads', () => {
      const data = random(100);
      before(async () => {
        await put('dl/file.bin', data);
        await fx.mkdir('dl/folder');
      });

      it('GET /files/<path> answers the entry with a download_uri; the URI serves the bytes with ETag, Content-Disposition and Accept-Ranges', async () => {
        const r = await fx.api('GET', fx.files('dl/file.bin'));
        expect(r.status, r.text).to.equal(200);
        expect(r.json).to.have.all.keys(...ENTRY_FIELDS, 'download_uri');
        expect(r.json).to.include({ path: 'dl/file.bin', type: 'file', size: 100 });
        const { download_uri: _uri, ...entry } = r.json;
        expect(entry).to.deep.equal((await fx.stat('dl/file.bin')).json);
        expect(new URL(r.json.download_uri).origin).to.equal(`https://127.0.0.1:${fx.gw.port}`);

        const d = await fx.transfer(r.json.download_uri);
        expect(d.status).to.equal(200);
        expect(d.body.equals(data)).to.be.true;
        expect(d.headers['content-length']).to.equal('100');
        expect(d.headers['accept-ranges']).to.equal('bytes');
        expect(d.headers.etag).to.match(/^"[^"]+"$/);
        expect(
          contentDisposition.parse(String(d.headers['content-disposition'])).parameters.filename,
        ).to.equal('file.bin');
        const head = await fx.transfer(r.json.download_uri, { method: 'HEAD' });
        expect(head.status).to.equal(200);
        expect(head.body.length).to.equal(0);
        expect(head.headers.etag).to.equal(d.headers.etag);
        expect(head.headers['content-length']).to.equal('100');
      });

      it('Range gives 206 with Content-Range; If-None-Match gives 304; a range past the end is refused', async () => {
        const uri = await fx.downloadUri('dl/file.bin');
        const part = await fx.transfer(uri, { headers: { Range: 'bytes=10-19' } });
        expect(part.status).to.equal(206);
        expect(part.headers['content-range']).to.equal('bytes 10-19/100');
        expect(part.headers['content-length']).to.equal('10');
        expect(part.body.equals(data.subarray(10, 20))).to.be.true;
        const suffix = await fx.transfer(uri, { headers: { Range: 'bytes=-5' } });
        expect(suffix.status).to.equal(206);
        expect(suffix.body.equals(data.subarray(95))).to.be.true;
        const open = await fx.transfer(uri, { headers: { Range: 'bytes=90-' } });
        expect(open.headers['content-range']).to.equal('bytes 90-99/100');
        expect(open.body.equals(data.subarray(90))).to.be.true;
        const first = await fx.transfer(uri, { headers: { Range: 'bytes=0-0' } });
        expect(first.status).to.equal(206);
        expect(first.headers['content-range']).to.equal('bytes 0-0/100');
        expect(first.body.equals(data.subarray(0, 1))).to.be.true;

        const etag = String((await fx.transfer(uri, { method: 'HEAD' })).headers.etag);
        const cached = await fx.transfer(uri, { headers: { 'If-None-Match': etag } });
        expect(cached.status).to.equal(304);
        expect(cached.body.length).to.equal(0);
        const stale = await fx.transfer(uri, { headers: { 'If-None-Match': '"something-else"' } });
        expect(stale.status).to.equal(200);
        // If-Range: the range only while the client's copy is this version.
        const same = await fx.transfer(uri, { headers: { Range: 'bytes=10-19', 'If-Range': etag } });
        expect(same.status).to.equal(206);
        const changed = await fx.transfer(uri, { headers: { Range: 'bytes=10-19', 'If-Range': '"older"' } });
        expect(changed.status).to.equal(200);
        expect(changed.body.equals(data)).to.be.true;

        const past = await fx.transfer(uri, { headers: { Range: 'bytes=100-200' } });
        expect([416, 422], past.body.toString()).to.include(past.status);
        expect(JSON.parse(past.body.toString()).type).to.equal('processing-failure/invalid-range');
        expect(past.headers['content-range']).to.equal('bytes */100');
      });

      it('a tampered token is 401; an expired token is 401', async () => {
        const uri = await fx.downloadUri('dl/file.bin');
        const u = new URL(uri);
        const token = u.pathname.slice('/download/'.length);
        const [body, sig] = token.split('.') as [string, string];
        const claims = JSON.parse(Buffer.from(body, 'base64url').toString()) as Record<string, unknown>;

        const flip = (s: string) => (s[0] === 'A' ? 'B' : 'A') + s.slice(1);
        const forged = Buffer.from(JSON.stringify({ ...claims, s: 1_000_000 })).toString('base64url');
        for (const bad of [
          `${body}.${flip(sig)}`,
          `${flip(body)}.${sig}`,
          `${forged}.${sig}`,
          'garbage',
          `${body}.`,
        ]) {
          const r = await fx.transfer(`${u.origin}/download/${bad}`);
          expect(r.status, bad).to.equal(401);
          expect(JSON.parse(r.body.toString()).type).to.match(/^not-authenticated\//);
        }

        const { exp: _exp, ...rest } = claims;
        const signer = new Signer(TEST_SECRET, 'download');
        // The same claims signed for a minute work (so the signing is right) and signed expired do not.
        const fresh = await fx.transfer(`${u.origin}/download/${signer.sign(rest, 60)}`);
        expect(fresh.status).to.equal(200);
        expect(fresh.body.equals(data)).to.be.true;
        const expired = await fx.transfer(`${u.origin}/download/${signer.sign(rest, -1)}`);
        expect(expired.status, expired.body.toString()).to.equal(401);
        expect(JSON.parse(expired.body.toString()).type).to.equal('not-authenticated/invalid-credentials');
        // An upload token is no download token.
        const uploadSigned = new Signer(TEST_SECRET, 'upload').sign(rest, 60);
        expect((await fx.transfer(`${u.origin}/download/${uploadSigned}`)).status).to.equal(401);
      });

      it('action=stat omits download_uri and records no read Action; a plain GET records one', async () => {
        const reads = async () => (await fx.actions({ action: 'read', path: 'dl/file.bin' })).length;
        const before = await reads();
        const stat = await fx.stat('dl/file.bin');
        expect(stat.status).to.equal(200);
        expect(stat.json).to.have.all.keys(...ENTRY_FIELDS);
        expect(await reads()).to.equal(before);
        await fx.downloadUri('dl/file.bin');
        const after = await fx.actions({ action: 'read', path: 'dl/file.bin' });
        expect(after).to.have.length(before + 1);
        expect(after.at(-1)!.interface).to.equal('restapi');
      });

      it('GET on a folder is 400 cannot-download-directory; action=stat on a folder works; a missing file is 404', async () => {
        expectError(await fx.api('GET', fx.files('dl/folder')), 400, 'bad-request/cannot-download-directory');
        const stat = await fx.stat('dl/folder');
        expect(stat.status, stat.text).to.equal(200);
        expect(stat.json).to.include({ path: 'dl/folder', type: 'directory', size: null });
        expectError(await fx.api('GET', fx.files('dl/missing.bin')), 404, 'not-found/file-not-found');
        expectError(await fx.stat('dl/missing.bin'), 404, 'not-found/file-not-found');
      });
    });

    describe('move, copy and delete', () => {
      const move = (from: string, to: string) =>
        fx.api('POST', fx.files(from), { body: { 'move-destination': to } });
      const copy = (from: string, to: string) =>
        fx.api('POST', fx.files(from), { body: { 'copy-destination': to } });

      it('move-destination renames a file (same bytes) and records a move Action with source and destination', async () => {
        const data = random(500);
        const before = await put('mv/a.bin', data);
        const r = await move('mv/a.bin', 'mv/b.bin');
        expect(r.status, r.text).to.equal(200);
        expect(r.json).to.deep.equal([]);
        expect(await fx.exists('mv/a.bin')).to.be.false;
        const after = (await fx.stat('mv/b.bin')).json;
        expect(after).to.include({ path: 'mv/b.bin', size: 500, md5: before.md5, mtime: before.mtime });
        expect((await fx.download('mv/b.bin')).equals(data)).to.be.true;
        const moves = await fx.actions({ action: 'move', source: 'mv/a.bin' });
        expect(moves.map((a) => [a.path, a.source, a.destination, a.interface])).to.deep.equal([
          ['mv/b.bin', 'mv/a.bin', 'mv/b.bin', 'restapi'],
        ]);
      });

      it('moving a folder moves everything below it, and nothing beside it', async () => {
        await put('mv/dir/x.txt', 'x');
        await put('mv/dir/sub/deeper/y.txt', 'y');
        await put('mv/dir2/z.txt', 'z');
        await put('mv/dirx', 'a file named like the folder');
        const r = await move('mv/dir', 'mv/moved');
        expect(r.status, r.text).to.equal(200);
        expect(await fx.names('mv/moved')).to.deep.equal(['sub', 'x.txt']);
        expect((await fx.list('mv/moved/sub')).map((e) => e.path)).to.deep.equal(['mv/moved/sub/deeper']);
        expect(await text('mv/moved/sub/deeper/y.txt')).to.equal('y');
        expect(await text('mv/moved/x.txt')).to.equal('x');
        for (const gone of ['mv/dir', 'mv/dir/x.txt', 'mv/dir/sub', 'mv/dir/sub/deeper/y.txt']) {
          expect(await fx.exists(gone), gone).to.be.false;
        }
        expect(await text('mv/dir2/z.txt')).to.equal('z');
        expect(await text('mv/dirx')).to.equal('a file named like the folder');
        // Into another folder, under a Unicode name, and back: paths below follow each time.
        await fx.mkdir('mv/elsewhere');
        expect((await move('mv/moved', 'mv/elsewhere/ünï 日本 🎉')).status).to.equal(200);
        expect(await text('mv/elsewhere/ünï 日本 🎉/sub/deeper/y.txt')).to.equal('y');
        expect((await move('mv/elsewhere/ünï 日本 🎉', 'mv/back')).status).to.equal(200);
        expect(await text('mv/back/sub/deeper/y.txt')).to.equal('y');
        expect((await fx.list('mv/back/sub')).map((e) => e.path)).to.deep.equal(['mv/back/sub/deeper']);
      });

      it('copy-destination copies a folder tree; the copy is independent of the original', async () => {
        const f1 = random(2000);
        const f2 = random(3000);
        await put('cp/tree/f1.bin', f1);
        await put('cp/tree/s/f2.bin', f2);
        await fx.mkdir('cp/tree/empty');
        const r = await copy('cp/tree', 'cp/copy');
        expect(r.status, r.text).to.equal(200);
        expect(r.json).to.deep.equal([]);
        // A sibling whose name starts with the folder's is another tree.
        expect((await copy('cp/tree', 'cp/tree2')).status).to.equal(200);
        expect(await fx.names('cp/tree2/s')).to.deep.equal(['f2.bin']);
        expect(await fx.names('cp/tree')).to.deep.equal(['empty', 'f1.bin', 's']);
        expect(await fx.names('cp/copy')).to.deep.equal(['empty', 'f1.bin', 's']);
        expect((await fx.download('cp/copy/f1.bin')).equals(f1)).to.be.true;
        expect((await fx.download('cp/copy/s/f2.bin')).equals(f2)).to.be.true;
        expect((await fx.download('cp/tree/f1.bin')).equals(f1)).to.be.true;
        const copies = await fx.actions({ action: 'copy', source: 'cp/tree', destination: 'cp/copy' });
        expect(copies.map((a) => [a.path, a.source, a.destination])).to.deep.equal([
          ['cp/copy', 'cp/tree', 'cp/copy'],
        ]);

        // Overwriting a copied file leaves the original; deleting the copy (and collecting its garbage) too.
        await put('cp/copy/f1.bin', 'changed');
        expect((await fx.download('cp/tree/f1.bin')).equals(f1)).to.be.true;
        const del = await fx.api('DELETE', fx.files('cp/copy'), { headers: { Depth: 'infinity' } });
        expect(del.status, del.text).to.equal(200);
        await fx.collectGarbage();
        expect(await fx.exists('cp/copy')).to.be.false;
        expect((await fx.download('cp/tree/f1.bin')).equals(f1)).to.be.true;
        expect((await fx.download('cp/tree/s/f2.bin')).equals(f2)).to.be.true;
        expect(await fx.names('cp/tree')).to.deep.equal(['empty', 'f1.bin', 's']);

        // A copied file, then the original deleted and collected: the copy keeps its bytes.
        expect((await copy('cp/tree/s/f2.bin', 'cp/f2-copy.bin')).status).to.equal(200);
        expect((await fx.api('DELETE', fx.files('cp/tree/s/f2.bin'))).status).to.equal(200);
        await fx.collectGarbage();
        expect((await fx.download('cp/f2-copy.bin')).equals(f2)).to.be.true;
      });

      it('refuses an existing destination, a missing destination parent, a folder into itself and the same path, changing nothing', async () => {
        await put('mr/a.txt', 'a');
        await put('mr/b.txt', 'b');
        await put('mr/folder/inside.txt', 'i');
        await fx.mkdir('mr/other');
        const before = await fx.snapshot();
        for (const op of [move, copy]) {
          expectError(await op('mr/a.txt', 'mr/b.txt'), 422, 'processing-failure/destination-exists');
          expectError(await op('mr/folder', 'mr/other'), 422, 'processing-failure/destination-exists');
          expectError(await op('mr/a.txt', 'mr/folder'), 422, 'processing-failure/destination-exists');
          expectError(
            await op('mr/a.txt', 'mr/none/a.txt'),
            422,
            'processing-failure/destination-parent-does-not-exist',
          );
          expectError(
            await op('mr/folder', 'mr/folder/sub'),
            422,
            'processing-failure/destination-parent-conflict',
          );
          expectError(
            await op('mr/folder', 'mr/folder/x/y'),
            422,
            'processing-failure/destination-parent-conflict',
          );
          expectError(await op('mr/a.txt', 'mr/a.txt'), 400, 'bad-request/destination-same');
          expectError(await op('mr/folder', '/mr/folder/'), 400, 'bad-request/destination-same');
          expectError(await op('mr/missing.txt', 'mr/c.txt'), 404, 'not-found/file-not-found');
          expectError(await op('mr/a.txt', 'mr/b.txt/c.txt'), 400, 'bad-request/folder-must-not-be-a-file');
        }
        const both = await fx.api('POST', fx.files('mr/a.txt'), {
          body: { 'move-destination': 'mr/x.txt', 'copy-destination': 'mr/y.txt' },
        });
        expectError(both, 400, 'bad-request/cant-move-with-multiple-locations');
        expectError(
          await fx.api('POST', fx.files('mr/a.txt'), { body: {} }),
          400,
          'bad-request/no-valid-input-params',
        );
        expect(await fx.snapshot()).to.deep.equal(before);
      });

      it('DELETE removes a file (200 []); a non-empty folder only with Depth: infinity, with everything below', async () => {
        await put('rm/file.txt', 'f');
        await put('rm/full/a.txt', 'a');
        await put('rm/full/sub/b.txt', 'b');
        await fx.mkdir('rm/empty');
        await put('rm/fullx.txt', 'beside');

        const r = await fx.api('DELETE', fx.files('rm/file.txt'));
        expect(r.status, r.text).to.equal(200);
        expect(r.json).to.deep.equal([]);
        expect(await fx.exists('rm/file.txt')).to.be.false;
        expect(await fx.actions({ action: 'destroy', path: 'rm/file.txt' })).to.have.length(1);

        const before = await fx.snapshot();
        expectError(await fx.api('DELETE', fx.files('rm/full')), 422, 'processing-failure/folder-not-empty');
        const depth2 = await fx.api('DELETE', fx.files('rm/full'), { headers: { Depth: '2' } });
        expectError(depth2, 400, 'bad-request/request-params-invalid');
        expect(await fx.snapshot()).to.deep.equal(before);

        expect((await fx.api('DELETE', fx.files('rm/empty'))).status).to.equal(200);
        expect(await fx.exists('rm/empty')).to.be.false;

        const deep = await fx.api('DELETE', fx.files('rm/full'), { headers: { Depth: 'infinity' } });
        expect(deep.status, deep.text).to.equal(200);
        expect(deep.json).to.deep.equal([]);
        for (const gone of ['rm/full', 'rm/full/a.txt', 'rm/full/sub', 'rm/full/sub/b.txt']) {
          expect(await fx.exists(gone), gone).to.be.false;
        }
        expect(await fx.names('rm')).to.deep.equal(['fullx.txt']);
        expect(await text('rm/fullx.txt')).to.equal('beside');
        expectError(await fx.api('DELETE', fx.files('rm/full')), 404, 'not-found/file-not-found');
        // A re-created folder of the same name starts empty.
        await fx.mkdir('rm/full');
        expect(await fx.list('rm/full')).to.deep.equal([]);
      });

      it('the root folder cannot be deleted, moved or copied', async () => {
        await fx.mkdir('root-guard');
        const before = await fx.snapshot();
        for (const r of [
          await fx.api('DELETE', '/files/', { headers: { Depth: 'infinity' } }),
          await fx.api('DELETE', '/files'),
          await fx.api('POST', '/files/', { body: { 'move-destination': 'elsewhere' } }),
          await fx.api('POST', '/files/', { body: { 'copy-destination': 'elsewhere' } }),
        ]) {
          expect(r.status, r.text).to.be.within(400, 499);
        }
        expect(await fx.snapshot()).to.deep.equal(before);
      });
    });
  });
}
