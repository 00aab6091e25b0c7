/**
 * SPEC "Upload lifecycle" over real HTTPS, once on the local blob store and once on S3: start
 * (`action=put`), parts sent to the Upload object's upload_uri as `send` says, more part URLs,
 * `restart`, `action=end`; overwrites (`update` Actions), atomic replacement seen by a concurrent
 * download, and garbage collection of the replaced bytes (DESIGN.md "Namespace in the database").
 */
import { expect } from 'chai';
import type { IncomingMessage } from 'node:http';
import { BlobLeaseEntity, FileEntity, UploadEntity } from '../../../src/db/entities.ts';
import { expectError } from './client.ts';
import { crc32, filesFixture, md5, MiB, random, STORES, type FileEntry } from './files-fixture.ts';
import { dbOf, filesOf } from '../../helpers/internals.ts';

for (const store of STORES) {
  describe(`REST files: uploads (${store} store)`, function () {
    this.timeout(30_000);
    const fx = filesFixture(store);
    const local = store === 'local';
    // The 3 minutes of a download URL pass: the leases that kept blobs for URLs expire.
    const expireDownloadUrls = () =>
      dbOf(fx.gw.core).work((em) =>
        em.update(BlobLeaseEntity, { instance: 'signed-url' }, { expires_at: new Date(Date.now() - 1) }),
      );

    before(async () => {
      await fx.mkdir('up');
    });

    /** expectEntryOf checks a file entry describes exactly `data` (md5/crc32 may be null on S3). */
    const expectEntryOf = (entry: FileEntry, path: string, data: Buffer) => {
      expect(entry).to.include({ path, type: 'file', size: data.length });
      expect(entry).to.not.have.property('download_uri');
      expect(new Date(entry.mtime).toISOString()).to.equal(entry.mtime);
      expect(Date.now() - Date.parse(entry.mtime)).to.be.within(-5_000, 60_000);
      if (local) {
        expect(entry.md5).to.equal(md5(data));
        expect(entry.crc32).to.equal(crc32(data));
      } else {
        if (entry.md5 !== null) expect(entry.md5).to.equal(md5(data));
        if (entry.crc32 !== null) expect(entry.crc32).to.equal(crc32(data));
      }
    };

    it('action=put answers an Upload object with every SPEC field; action=end the file entry; a create Action', async () => {
      const data = random(100_000);
      const upload = await fx.startUpload('up/first.bin');
      expect(upload.ref).to.be.a('string').and.not.equal('');
      expect(upload).to.include({
        path: 'up/first.bin',
        action: 'put/write',
        ask_about_overwrites: false,
        http_method: 'PUT',
        part_number: 1,
        available_parts: 10000,
      });
      expect(upload.partsize)
        .to.be.a('number')
        .and.satisfy(Number.isInteger)
        .and.at.least(5 * MiB);
      const uri = new URL(upload.upload_uri);
      if (local) expect(uri.origin).to.equal(`https://127.0.0.1:${fx.gw.port}`);
      else expect(upload.upload_uri.startsWith(`${fx.s3!.endpoint}/`), upload.upload_uri).to.be.true;
      expect(upload.send).to.be.an('object');
      expect(Object.values(upload.send)).to.include('body');
      expect(upload.send.partsize).to.equal('required-header Content-Length');
      expect(upload.headers).to.be.an('object');
      expect(upload.parameters).to.deep.equal({});

      // Nothing is visible before the end: not after the start, not after the bytes were sent.
      expect(await fx.exists('up/first.bin')).to.be.false;
      const put = await fx.putPart(upload, data);
      expect(put.headers.etag).to.be.a('string');
      expect(await fx.exists('up/first.bin')).to.be.false;

      const end = await fx.end('up/first.bin', upload.ref);
      expect(end.status, end.text).to.equal(200);
      expectEntryOf(end.json, 'up/first.bin', data);

      const stat = await fx.stat('up/first.bin');
      expect(stat.status).to.equal(200);
      expect(stat.json).to.deep.equal(end.json);
      expect((await fx.download('up/first.bin')).equals(data)).to.be.true;

      const actions = await fx.actions({ path: 'up/first.bin' });
      expect(actions.map((a) => [a.action, a.interface])).to.deep.include(['create', 'restapi']);
      expect(actions.filter((a) => a.action === 'create' || a.action === 'update')).to.have.length(1);
    });

    it('takes action=put and action=end form-encoded, as SPEC writes them', async () => {
      const form = { 'Content-Type': 'application/x-www-form-urlencoded' };
      const start = await fx.api('POST', fx.files('up/form.txt'), { headers: form, body: 'action=put' });
      expect(start.status, start.text).to.equal(200);
      await fx.putPart(start.json, Buffer.from('form data'));
      const end = await fx.api('POST', fx.files('up/form.txt'), {
        headers: form,
        body: `action=end&ref=${start.json.ref}`,
      });
      expect(end.status, end.text).to.equal(200);
      expect(end.json.size).to.equal(9);
      expect((await fx.download('up/form.txt')).toString()).to.equal('form data');
    });

    it('a multi-part upload over 5 MB (5 MiB + 1 MiB + 7 bytes) downloads byte for byte', async () => {
      const part1 = random(5 * MiB);
      const part2 = random(MiB + 7);
      const all = Buffer.concat([part1, part2]);
      const upload = await fx.startUpload('up/big.bin');
      await fx.putPart(upload, part1);
      const second = await fx.partUrl('up/big.bin', upload.ref, 2);
      expect(second).to.include({
        ref: upload.ref,
        path: 'up/big.bin',
        part_number: 2,
        available_parts: 10000,
      });
      expect(second.upload_uri).to.not.equal(upload.upload_uri);
      await fx.putPart(second, part2);
      const end = await fx.end('up/big.bin', upload.ref);
      expect(end.status, end.text).to.equal(200);
      expectEntryOf(end.json, 'up/big.bin', all);

      const got = await fx.download('up/big.bin');
      expect(got.length).to.equal(all.length);
      expect(md5(got)).to.equal(md5(all));
      // The seam between the parts, by Range.
      const seam = await fx.transfer(await fx.downloadUri('up/big.bin'), {
        headers: { Range: `bytes=${5 * MiB - 3}-${5 * MiB + 3}` },
      });
      expect(seam.status).to.equal(206);
      expect(seam.body.equals(all.subarray(5 * MiB - 3, 5 * MiB + 4))).to.be.true;
    });

    it('an overwrite says ask_about_overwrites (start and part URLs), records update, and replaces the content', async () => {
      const v1 = random(3000);
      const v2 = random(2000);
      const first = await fx.upload('up/over.bin', v1);
      expect(first.upload.ask_about_overwrites).to.be.false;

      const upload = await fx.startUpload('up/over.bin');
      expect(upload.ask_about_overwrites).to.be.true;
      // SPEC: true if a file of that name exists and will be overwritten, for every Upload object.
      const again = await fx.partUrl('up/over.bin', upload.ref, 1);
      expect(again.ask_about_overwrites).to.be.true;
      await fx.putPart(again, v2);
      // Until the end, readers get the old content.
      expect((await fx.download('up/over.bin')).equals(v1)).to.be.true;
      const end = await fx.end('up/over.bin', upload.ref);
      expect(end.status, end.text).to.equal(200);
      expectEntryOf(end.json, 'up/over.bin', v2);
      expect((await fx.download('up/over.bin')).equals(v2)).to.be.true;

      const writes = (await fx.actions({ path: 'up/over.bin' })).filter((a) => a.action !== 'read');
      expect(writes.map((a) => [a.action, a.interface, a.path])).to.deep.equal([
        ['create', 'restapi', 'up/over.bin'],
        ['update', 'restapi', 'up/over.bin'],
      ]);
    });

    it('re-uploading a part number replaces that part', async () => {
      const upload = await fx.startUpload('up/retry.txt');
      await fx.putPart(upload, Buffer.from('first attempt, discarded'));
      const retry = await fx.partUrl('up/retry.txt', upload.ref, 1);
      expect(retry.part_number).to.equal(1);
      await fx.putPart(retry, Buffer.from('second attempt'));
      const end = await fx.end('up/retry.txt', upload.ref);
      expect(end.status, end.text).to.equal(200);
      expect(end.json.size).to.equal(14);
      expect((await fx.download('up/retry.txt')).toString()).to.equal('second attempt');
    });

    it('restart=<bytes> keeps that many bytes of the current file and appends the new part', async () => {
      await fx.upload('up/restart.txt', Buffer.from('hello world'));
      const upload = await fx.startUpload('up/restart.txt', { restart: 5 });
      expect(upload.ask_about_overwrites).to.be.true;
      // SPEC: available_parts is lower by the parts reserved to copy the kept bytes (on S3 a restart
      // this small reserves none: the kept bytes travel in front of part 1).
      if (local) expect(upload.available_parts).to.be.below(10000).and.at.least(9999);
      else expect(upload.available_parts).to.equal(10000);
      await fx.putPart(upload, Buffer.from(', there'));
      const end = await fx.end('up/restart.txt', upload.ref);
      expect(end.status, end.text).to.equal(200);
      expectEntryOf(end.json, 'up/restart.txt', Buffer.from('hello, there'));
      expect((await fx.download('up/restart.txt')).toString()).to.equal('hello, there');

      // restart = the current size appends; restart=0 is a plain overwrite with all 10000 parts.
      const append = await fx.startUpload('up/restart.txt', { restart: 12 });
      await fx.putPart(append, Buffer.from('!'));
      expect((await fx.end('up/restart.txt', append.ref)).status).to.equal(200);
      expect((await fx.download('up/restart.txt')).toString()).to.equal('hello, there!');
      const zero = await fx.startUpload('up/restart.txt', { restart: 0 });
      expect(zero.available_parts).to.equal(10000);
    });

    it('a restart keeps the bytes of the file as it was at the start, even if it is overwritten meanwhile', async () => {
      await fx.upload('up/restart-race.txt', Buffer.from('0123456789'));
      const upload = await fx.startUpload('up/restart-race.txt', { restart: 4 });
      await fx.upload('up/restart-race.txt', Buffer.from('abcdefghij'));
      await fx.collectGarbage();
      await fx.putPart(upload, Buffer.from('XY'));
      const end = await fx.end('up/restart-race.txt', upload.ref);
      expect(end.status, end.text).to.equal(200);
      expect((await fx.download('up/restart-race.txt')).toString()).to.equal('0123XY');
    });

    if (!local) {
      it('on S3 a restart below 5 MiB: part 1 goes through the gateway behind the kept bytes, part 2 straight to S3', async () => {
        const old = random(3 * MiB);
        await fx.upload('up/restart-s3.bin', old);
        const open = await fx.s3!.uploadsInProgress();
        const upload = await fx.startUpload('up/restart-s3.bin', { restart: 1000 });
        expect(upload.available_parts).to.equal(10000);
        expect(new URL(upload.upload_uri).origin).to.equal(`https://127.0.0.1:${fx.gw.port}`);
        const p1 = random(5 * MiB);
        const p2 = random(4321);
        await fx.putPart(upload, p1);
        const second = await fx.partUrl('up/restart-s3.bin', upload.ref, 2);
        expect(second.upload_uri.startsWith(`${fx.s3!.endpoint}/`), second.upload_uri).to.be.true;
        await fx.putPart(second, p2);
        const end = await fx.end('up/restart-s3.bin', upload.ref);
        expect(end.status, end.text).to.equal(200);
        const want = Buffer.concat([old.subarray(0, 1000), p1, p2]);
        expect(end.json.size).to.equal(want.length);
        expect((await fx.download('up/restart-s3.bin')).equals(want)).to.be.true;
        expect(await fx.s3!.uploadsInProgress()).to.equal(open);
      });

      it('on S3 a small restart with no new part keeps the kept bytes; one small part appends', async () => {
        await fx.upload('up/restart-s3.txt', Buffer.from('hello world'));
        const open = await fx.s3!.uploadsInProgress();
        const none = await fx.startUpload('up/restart-s3.txt', { restart: 5 });
        expect((await fx.end('up/restart-s3.txt', none.ref)).status).to.equal(200);
        expect((await fx.download('up/restart-s3.txt')).toString()).to.equal('hello');
        const one = await fx.startUpload('up/restart-s3.txt', { restart: 5 });
        await fx.putPart(one, Buffer.from(', there'));
        expect((await fx.end('up/restart-s3.txt', one.ref)).status).to.equal(200);
        expect((await fx.download('up/restart-s3.txt')).toString()).to.equal('hello, there');
        expect(await fx.s3!.uploadsInProgress()).to.equal(open);
      });
    }

    it('restart of exactly 5 MiB keeps the first 5 MiB and appends the new part', async () => {
      const old = random(5 * MiB + 1000);
      await fx.upload('up/restart-big.bin', old);
      const upload = await fx.startUpload('up/restart-big.bin', { restart: 5 * MiB });
      expect(upload.available_parts).to.equal(9999);
      expect(upload.part_number).to.equal(1);
      const tail = random(777);
      await fx.putPart(upload, tail);
      const end = await fx.end('up/restart-big.bin', upload.ref);
      expect(end.status, end.text).to.equal(200);
      const expected = Buffer.concat([old.subarray(0, 5 * MiB), tail]);
      expectEntryOf(end.json, 'up/restart-big.bin', expected);
      expect(md5(await fx.download('up/restart-big.bin'))).to.equal(md5(expected));
    });

    it('a zero-byte file: one empty part', async () => {
      const { entry } = await fx.upload('up/empty-part.txt', Buffer.alloc(0));
      expectEntryOf(entry, 'up/empty-part.txt', Buffer.alloc(0));
      if (local) expect(entry).to.include({ md5: 'd41d8cd98f00b204e9800998ecf8427e', crc32: '00000000' });
      const uri = await fx.downloadUri('up/empty-part.txt');
      const r = await fx.transfer(uri);
      expect(r.status).to.equal(200);
      expect(r.body.length).to.equal(0);
      expect(r.headers['content-length']).to.equal('0');
    });

    it('a zero-byte file: action=end without any part', async () => {
      const upload = await fx.startUpload('up/empty-none.txt');
      const end = await fx.end('up/empty-none.txt', upload.ref);
      expect(end.status, end.text).to.equal(200);
      expectEntryOf(end.json, 'up/empty-none.txt', Buffer.alloc(0));
      expect((await fx.download('up/empty-none.txt')).length).to.equal(0);
    });

    it('action=end twice: the second is 404 file-upload-not-found and changes nothing', async () => {
      const { upload } = await fx.upload('up/twice.txt', Buffer.from('once'));
      const before = await fx.snapshot();
      expectError(await fx.end('up/twice.txt', upload.ref), 404, 'not-found/file-upload-not-found');
      expect(await fx.snapshot()).to.deep.equal(before);
      if (local) {
        // The part URL of a finished upload no longer takes bytes.
        const r = await fx.transfer(upload.upload_uri, {
          method: 'PUT',
          headers: { 'Content-Length': 5 },
          body: Buffer.from('later'),
        });
        expect(r.status, r.body.toString()).to.equal(404);
        expect(JSON.parse(r.body.toString()).type).to.equal('not-found/file-upload-not-found');
      }
      expect((await fx.download('up/twice.txt')).toString()).to.equal('once');
    });

    it('two uploads of one path: the one that ends last wins, each whole', async () => {
      const a = random(4000);
      const b = random(5000);
      const ua = await fx.startUpload('up/race.bin');
      const ub = await fx.startUpload('up/race.bin');
      expect(ua.ref).to.not.equal(ub.ref);
      await fx.putPart(ua, a);
      await fx.putPart(ub, b);
      expect((await fx.end('up/race.bin', ub.ref)).status).to.equal(200);
      expect((await fx.download('up/race.bin')).equals(b)).to.be.true;
      const end = await fx.end('up/race.bin', ua.ref);
      expect(end.status, end.text).to.equal(200);
      expect(end.json.size).to.equal(4000);
      expect((await fx.download('up/race.bin')).equals(a)).to.be.true;
      const writes = (await fx.actions({ path: 'up/race.bin' }))
        .map((x) => x.action)
        .filter((x) => x !== 'read');
      expect(writes).to.deep.equal(['create', 'update']);
    });

    it('a download running during an overwrite gets the old or the new content whole', async () => {
      const v1 = random(3 * MiB);
      const v2 = random(3 * MiB);
      await fx.upload('up/atomic.bin', v1);
      const uri = await fx.downloadUri('up/atomic.bin');
      const chunks: Buffer[] = [];
      let started!: () => void;
      const firstChunk = new Promise<void>((resolve) => (started = resolve));
      let response!: IncomingMessage;
      const done = new Promise<number>((resolve, reject) => {
        const req = fx.openTransfer(uri, 'GET', {}, (res) => {
          response = res;
          res.on('data', (c: Buffer) => {
            chunks.push(c);
            if (chunks.length === 1) {
              res.pause();
              started();
            }
          });
          res.on('end', () => resolve(res.statusCode ?? 0));
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end();
      });
      await firstChunk;
      // The download has begun (and is held): overwrite the file now.
      await fx.upload('up/atomic.bin', v2);
      response.resume();
      expect(await done).to.equal(200);
      const body = Buffer.concat(chunks);
      expect(body.length).to.equal(3 * MiB);
      expect([md5(v1), md5(v2)], 'the download is one version, whole').to.include(md5(body));
      // A new download sees the new content.
      expect(md5(await fx.download('up/atomic.bin'))).to.equal(md5(v2));
    });

    it('after an overwrite and garbage collection the old blob is gone and the new content downloads', async () => {
      const v1 = random(4000);
      const v2 = random(5000);
      await fx.upload('up/gc.bin', v1);
      const oldBlob = await fx.blobIdOf('up/gc.bin');
      const oldUri = await fx.downloadUri('up/gc.bin');
      const blobsBefore = local ? fx.localBlobs() : [];
      if (local) expect(blobsBefore).to.include(oldBlob);
      await fx.upload('up/gc.bin', v2);
      const newBlob = await fx.blobIdOf('up/gc.bin');
      expect(newBlob).to.not.equal(oldBlob);
      // The download URL handed out before the overwrite keeps the old bytes while it is valid.
      await filesOf(fx.gw.core).blobs.idle();
      expect(await filesOf(fx.gw.core).store.size(oldBlob)).to.equal(v1.length);
      const held = await fx.transfer(oldUri);
      expect(held.status).to.equal(200);
      expect(held.body.equals(v1)).to.be.true;
      // Once no reader and no valid URL holds it, it goes, without waiting for the collection. The
      // reader's lease is released when the server's stream closes, which may come a moment after
      // the client has read the last byte (seen on a loaded machine): reclaim until it goes, 5 s.
      await expireDownloadUrls();
      for (let i = 0; i < 50; i++) {
        await filesOf(fx.gw.core).blobs.idle();
        await filesOf(fx.gw.core).blobs.reclaim([oldBlob]);
        if ((await filesOf(fx.gw.core).store.size(oldBlob)) === null) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(await filesOf(fx.gw.core).store.size(oldBlob)).to.equal(null);
      expect(await filesOf(fx.gw.core).store.size(newBlob)).to.equal(v2.length);
      if (local) {
        const blobsAfter = fx.localBlobs();
        expect(blobsAfter).to.not.include(oldBlob);
        expect(blobsAfter).to.include(newBlob);
        expect(blobsAfter.length).to.equal(blobsBefore.length);
      }
      expect((await fx.download('up/gc.bin')).equals(v2)).to.be.true;
      // A download URL of a collected version answers 404, not 500.
      const stale = await fx.transfer(oldUri);
      expect(stale.status, stale.body.toString()).to.equal(404);
      expect(JSON.parse(stale.body.toString()).type).to.equal('not-found/file-not-found');
    });

    it('garbage collection keeps exactly the blobs files refer to (no part, restart or old blob leaks)', async () => {
      // A restart upload whose kept blob is overwritten and collected meanwhile (local reads it at
      // the end; S3 copied it at the start), then ended.
      const open = local ? 0 : await fx.s3!.uploadsInProgress();
      const old = random(5 * MiB + 10);
      await fx.upload('up/leak.bin', old);
      const upload = await fx.startUpload('up/leak.bin', { restart: 5 * MiB });
      await fx.upload('up/leak.bin', random(100));
      await fx.collectGarbage();
      await fx.putPart(upload, Buffer.from('end'));
      expect((await fx.end('up/leak.bin', upload.ref)).status).to.equal(200);
      // An upload abandoned with a part sent, dropped when it expires.
      const abandoned = await fx.startUpload('up/abandoned.bin');
      await fx.putPart(abandoned, random(1000));
      await dbOf(fx.gw.core).work((em) =>
        em.update(UploadEntity, { ref: abandoned.ref }, { expires_at: new Date(Date.now() - 1000) }),
      );
      await expireDownloadUrls();
      await fx.collectGarbage();
      await fx.collectGarbage();

      const referenced = await fx.referencedBlobs();
      for (const blob of referenced)
        expect(await filesOf(fx.gw.core).store.size(blob), blob).to.not.equal(null);
      if (local) expect(fx.localBlobs()).to.deep.equal([...referenced].sort());
      else expect(await fx.s3!.uploadsInProgress()).to.equal(open);
      const rows = await dbOf(fx.gw.core).read((em) => em.count(FileEntity));
      expect(rows).to.be.above(0);
    });
  });
}
