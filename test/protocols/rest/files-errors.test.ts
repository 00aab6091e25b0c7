/**
 * Bad input and permissions on /files and /folders over real HTTPS, once per blob store: each bad
 * request gets its SPEC error type and DESIGN.md's status, never a 500, and leaves the namespace
 * (and the Action log) exactly as it was; users see the four permission levels of DESIGN.md
 * "Permissions"; a client that vanishes mid-part leaves the old content and a working server.
 */
import { expect } from 'chai';
import { Signer } from '../../../src/core/files/signed.ts';
import type { Response } from '../../helpers/gateway.ts';
import { API, createKey, createUser, expectError, keyAuth } from './client.ts';
import { filesFixture, MiB, random, sleep, STORES, TEST_SECRET } from './files-fixture.ts';

const INVALID = [400, 'bad-request/invalid-path'] as const;
const TOO_LONG = [422, 'processing-failure/path-too-long'] as const;
const NAME_TOO_LONG = [422, 'processing-failure/filename-too-long'] as const;

/** long550 is a path of exactly 550 characters (1,095 bytes) made of 2-byte characters; no name over 255 bytes. */
const long550 = [...Array(5).fill('é'.repeat(100)), 'é'.repeat(45)].join('/');

/** BAD_URL_PATHS are raw (already encoded) URL remainders after /files/ or /folders/, and the expected error. */
const BAD_URL_PATHS: [string, readonly [number, string]][] = [
  ['e/../etc', INVALID],
  ['..', INVALID],
  ['e/..', INVALID],
  ['e/%2e%2e/etc', INVALID],
  ['e/%2E%2E', INVALID],
  ['e/./x', INVALID],
  ['e/%2e/x', INVALID],
  ['e%2Fx', INVALID],
  ['e%2fx', INVALID],
  ['e%5Cx', INVALID],
  ['e\\x', INVALID],
  ['e/a%00b', INVALID],
  ['e/a%01b', INVALID],
  ['e/a%0Ab', INVALID],
  ['e/a%0Db', INVALID],
  ['e/a%1Fb', INVALID],
  ['e/a%7Fb', INVALID],
  ['e//x', INVALID],
  ['e/%FF', INVALID],
  ['e/%E0%A4%A', INVALID],
  ['e/%', INVALID],
  [`e/${'p'.repeat(200)}/${'q'.repeat(200)}/${'r'.repeat(150)}`, TOO_LONG],
  [encodeURI(`${long550}é`), TOO_LONG],
  [`e/${'n'.repeat(256)}`, NAME_TOO_LONG],
  [`e/${encodeURIComponent('é'.repeat(128))}`, NAME_TOO_LONG],
];

/** BAD_BODY_PATHS are destination paths (as JSON strings) a move or copy must refuse. */
const BAD_BODY_PATHS: [string, readonly [number, string]][] = [
  ['e/../x', INVALID],
  ['../x', INVALID],
  ['e/./x', INVALID],
  ['e\\x', INVALID],
  ['e/a\u0000b', INVALID],
  ['e/a\u0007b', INVALID],
  ['e//x', INVALID],
  [`e/${'p'.repeat(250)}/${'q'.repeat(250)}/${'r'.repeat(50)}`, TOO_LONG],
  [`e/${'n'.repeat(256)}`, NAME_TOO_LONG],
  [`e/${'ü'.repeat(128)}`, NAME_TOO_LONG],
];

for (const store of STORES) {
  describe(`REST files: bad input (${store} store)`, function () {
    this.timeout(30_000);
    const fx = filesFixture(store);
    const local = store === 'local';
    const old = Buffer.from('the old content');

    before(async () => {
      await fx.mkdir('e/dir');
      await fx.upload('e/file.txt', old);
    });

    /** unchanged runs requests and asserts the namespace and the Action log are as before. */
    const unchanged = async (fn: () => Promise<void>) => {
      const before = await fx.snapshot();
      await fn();
      expect(await fx.snapshot()).to.deep.equal(before);
    };
    const expectSpecError = (r: Response, [status, type]: readonly [number, string], what: string) => {
      expect(r.status, `${what}: ${r.text}`).to.equal(status);
      expectError(r, status, type);
    };

    it('malformed paths in the URL get invalid-path, path-too-long or filename-too-long on every endpoint', async () => {
      await unchanged(async () => {
        for (const [raw, expected] of BAD_URL_PATHS) {
          const tries: [string, string, unknown][] = [
            ['GET', `/folders/${raw}`, undefined],
            ['POST', `/folders/${raw}`, undefined],
            ['GET', `/files/${raw}`, undefined],
            ['GET', `/files/${raw}?action=stat`, undefined],
            ['POST', `/files/${raw}`, { action: 'put' }],
            ['POST', `/files/${raw}`, { 'move-destination': 'e/moved' }],
            ['DELETE', `/files/${raw}`, undefined],
          ];
          for (const [method, url, body] of tries) {
            const r = await fx.gw.request(method, `${API}${url}`, {
              headers: { ...fx.auth, Depth: 'infinity' },
              ...(body === undefined ? {} : { body }),
            });
            expectSpecError(r, expected, `${method} ${url}`);
          }
        }
      });
      expect((await fx.download('e/file.txt')).equals(old)).to.be.true;
    });

    it('a path of exactly 550 characters and a name of exactly 255 bytes are fine', async () => {
      await fx.mkdir(long550);
      expect((await fx.stat(long550)).json.path).to.equal(long550);
      await fx.upload(`e/${'n'.repeat(255)}`, Buffer.from('x'));
      await fx.mkdir(`e/${'ü'.repeat(127)}`);
      expect(await fx.names('e', `?search=${encodeURIComponent('ü')}`)).to.deep.equal(['ü'.repeat(127)]);
    });

    it('malformed move and copy destinations are refused the same way', async () => {
      await unchanged(async () => {
        for (const [dest, expected] of BAD_BODY_PATHS) {
          for (const field of ['move-destination', 'copy-destination']) {
            const r = await fx.api('POST', fx.files('e/file.txt'), { body: { [field]: dest } });
            expectSpecError(r, expected, `${field} ${JSON.stringify(dest)}`);
          }
        }
      });
    });

    it('a file where a folder is expected is 400 folder-must-not-be-a-file', async () => {
      await unchanged(async () => {
        const must = [400, 'bad-request/folder-must-not-be-a-file'] as const;
        expectSpecError(
          await fx.api('POST', fx.files('e/file.txt/x'), { body: { action: 'put' } }),
          must,
          'upload',
        );
        expectSpecError(await fx.api('POST', fx.folders('e/file.txt/sub')), must, 'mkdir');
        expectSpecError(await fx.api('POST', fx.folders('e/file.txt/sub/deeper')), must, 'mkdir -p');
        expectSpecError(await fx.api('GET', fx.folders('e/file.txt')), must, 'list');
        expectSpecError(
          await fx.api('POST', fx.files('e/dir'), { body: { 'move-destination': 'e/file.txt/dir' } }),
          must,
          'move',
        );
      });
    });

    it('uploading onto a folder is 422 destination-exists, at the start or (folder made meanwhile) at the end', async () => {
      await unchanged(async () => {
        expectSpecError(
          await fx.api('POST', fx.files('e/dir'), { body: { action: 'put' } }),
          [422, 'processing-failure/destination-exists'],
          'start onto a folder',
        );
      });
      const upload = await fx.startUpload('e/later');
      await fx.putPart(upload, Buffer.from('bytes'));
      await fx.mkdir('e/later');
      await unchanged(async () => {
        expectError(await fx.end('e/later', upload.ref), 422, 'processing-failure/destination-exists');
      });
      expect((await fx.stat('e/later')).json.type).to.equal('directory');
      // With the folder gone, the same upload can still be finished.
      expect((await fx.api('DELETE', fx.files('e/later'))).status).to.equal(200);
      const retry = await fx.end('e/later', upload.ref);
      expect(retry.status, retry.text).to.equal(200);
      expect((await fx.download('e/later')).toString()).to.equal('bytes');
    });

    it('an upload whose folder is deleted before the end fails with 422, creating nothing', async () => {
      await fx.mkdir('e/gone');
      const upload = await fx.startUpload('e/gone/x.txt');
      await fx.putPart(upload, Buffer.from('orphan'));
      expect((await fx.api('DELETE', fx.files('e/gone'))).status).to.equal(200);
      await unchanged(async () => {
        expectError(
          await fx.end('e/gone/x.txt', upload.ref),
          422,
          'processing-failure/destination-parent-does-not-exist',
        );
      });
      expect(await fx.exists('e/gone')).to.be.false;
    });

    it('part numbers: 0 and non-numbers are 400, 10001 is part-number-too-large, 10000 is fine', async () => {
      const upload = await fx.startUpload('e/parts.bin');
      const ask = (part: unknown) =>
        fx.api('POST', fx.files('e/parts.bin'), { body: { action: 'put', ref: upload.ref, part } });
      expectError(await ask(0), 400, 'bad-request/request-params-invalid');
      expectError(await ask(-1), 400, 'bad-request/request-params-invalid');
      expectError(await ask('two'), 400, 'bad-request/request-params-invalid');
      expectError(await ask(1.5), 400, 'bad-request/request-params-invalid');
      expectError(await ask(10001), 400, 'bad-request/part-number-too-large');
      expectError(await ask(99999999), 400, 'bad-request/part-number-too-large');
      const last = await ask(10000);
      expect(last.status, last.text).to.equal(200);
      expect(last.json.part_number).to.equal(10000);
    });

    if (local) {
      it('after a restart the reserved part is not available: part 10000 is part-number-too-large', async () => {
        const upload = await fx.startUpload('e/file.txt', { restart: 3 });
        expect(upload.available_parts).to.equal(9999);
        const r = await fx.api('POST', fx.files('e/file.txt'), {
          body: { action: 'put', ref: upload.ref, part: 10000 },
        });
        expectError(r, 400, 'bad-request/part-number-too-large');
      });
    }

    it('a part below 5 MiB that is not the last is 400 invalid-upload-part-size at the end; the upload stays open', async () => {
      const upload = await fx.startUpload('e/small-parts.bin');
      await fx.putPart(upload, random(1000));
      const second = await fx.partUrl('e/small-parts.bin', upload.ref, 2);
      const tail = random(2000);
      await fx.putPart(second, tail);
      await unchanged(async () => {
        expectError(
          await fx.end('e/small-parts.bin', upload.ref),
          400,
          'bad-request/invalid-upload-part-size',
        );
      });
      // The client fixes part 1 and ends again.
      const first = random(5 * MiB);
      await fx.putPart(await fx.partUrl('e/small-parts.bin', upload.ref, 1), first);
      const end = await fx.end('e/small-parts.bin', upload.ref);
      expect(end.status, end.text).to.equal(200);
      expect((await fx.download('e/small-parts.bin')).equals(Buffer.concat([first, tail]))).to.be.true;
    });

    it('a gap in part numbers is 400 invalid-upload-part-gap', async () => {
      const lonely = await fx.startUpload('e/gap.bin');
      await fx.putPart(await fx.partUrl('e/gap.bin', lonely.ref, 2), random(100));
      await unchanged(async () => {
        expectError(await fx.end('e/gap.bin', lonely.ref), 400, 'bad-request/invalid-upload-part-gap');
      });
      const holey = await fx.startUpload('e/gap.bin');
      await fx.putPart(holey, random(5 * MiB));
      await fx.putPart(await fx.partUrl('e/gap.bin', holey.ref, 3), random(100));
      await unchanged(async () => {
        expectError(await fx.end('e/gap.bin', holey.ref), 400, 'bad-request/invalid-upload-part-gap');
      });
      expect(await fx.exists('e/gap.bin')).to.be.false;
    });

    it('action=end with an unknown, malformed, missing or other-path ref changes nothing', async () => {
      const upload = await fx.startUpload('e/refs.txt');
      await fx.putPart(upload, Buffer.from('refs'));
      await unchanged(async () => {
        const notFound = 'not-found/file-upload-not-found';
        expectError(await fx.end('e/refs.txt', 'f'.repeat(32)), 404, notFound);
        expectError(await fx.end('e/refs.txt', 'not a ref'), 404, notFound);
        expectError(await fx.end('e/refs.txt', `${upload.ref}0`), 404, notFound);
        expectError(await fx.end('e/other.txt', upload.ref), 404, notFound);
        expectError(await fx.end('e/file.txt', upload.ref), 404, notFound);
        const partOfOther = await fx.api('POST', fx.files('e/other.txt'), {
          body: { action: 'put', ref: upload.ref, part: 2 },
        });
        expectError(partOfOther, 404, notFound);
        expectError(
          await fx.api('POST', fx.files('e/refs.txt'), { body: { action: 'end' } }),
          400,
          'bad-request/request-params-required',
        );
      });
      // The real ref still works.
      expect((await fx.end('e/refs.txt', upload.ref)).status).to.equal(200);
    });

    it('restart beyond the current size (or of a missing file) is 400 invalid-upload-offset', async () => {
      await unchanged(async () => {
        const start = (path: string, restart: unknown) =>
          fx.api('POST', fx.files(path), { body: { action: 'put', restart } });
        expectError(await start('e/file.txt', old.length + 1), 400, 'bad-request/invalid-upload-offset');
        expectError(await start('e/file.txt', 10 * MiB), 400, 'bad-request/invalid-upload-offset');
        expectError(await start('e/missing.txt', 1), 400, 'bad-request/invalid-upload-offset');
        expectError(await start('e/file.txt', -1), 400, 'bad-request/request-params-invalid');
        expectError(await start('e/file.txt', 'abc'), 400, 'bad-request/request-params-invalid');
      });
      if (!local) expect(await fx.s3!.uploadsInProgress()).to.be.a('number');
    });

    it('a client that disconnects in the middle of a part leaves the old content and a working server', async () => {
      const path = 'e/victim.bin';
      const v1 = random(3000);
      await fx.upload(path, v1);
      const upload = await fx.startUpload(path);
      const part1 = random(1000);
      await fx.putPart(upload, part1);
      const second = await fx.partUrl(path, upload.ref, 2);
      const data = random(2 * MiB);
      const { method, headers } = fx.partRequest(second, data);
      await new Promise<void>((resolve) => {
        const req = fx.openTransfer(second.upload_uri, method, headers, (res) => res.resume());
        req.on('error', () => undefined);
        req.on('close', () => resolve());
        req.write(data.subarray(0, MiB), () => setTimeout(() => req.destroy(), 100));
      });
      await sleep(200);

      // The server answers, and readers get the old content.
      expect((await fx.api('GET', '/folders/e')).status).to.equal(200);
      expect((await fx.download(path)).equals(v1)).to.be.true;
      if (local) {
        // No half-written blob stays behind.
        for (let i = 0; i < 20 && fx.localBlobs().some((b) => b.endsWith('.partial')); i++) await sleep(100);
        expect(fx.localBlobs().filter((b) => b.endsWith('.partial'))).to.deep.equal([]);
      }

      const end = await fx.end(path, upload.ref);
      expect(end.status, end.text).to.be.below(500);
      if (end.status === 200) {
        // Only the complete part made it.
        expect((await fx.download(path)).equals(part1)).to.be.true;
      } else {
        expect(end.status).to.be.within(400, 499);
        expect(end.json.type).to.be.a('string');
        expect((await fx.download(path)).equals(v1)).to.be.true;
      }
    });

    if (local) {
      it('a part without Content-Length, or with a tampered or expired token, is refused and stores nothing', async () => {
        const upload = await fx.startUpload('e/tokens.txt');
        const before = fx.localBlobs();
        const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = fx.openTransfer(upload.upload_uri, 'PUT', { 'Transfer-Encoding': 'chunked' }, (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () =>
              resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }),
            );
          });
          req.on('error', reject);
          req.write('some ');
          req.end('bytes');
        });
        expect(chunked.status, chunked.body).to.equal(400);
        expect(JSON.parse(chunked.body).type).to.equal('bad-request/request-params-required');

        const u = new URL(upload.upload_uri);
        const token = u.pathname.slice('/upload/'.length);
        const [body, sig] = token.split('.') as [string, string];
        const claims = JSON.parse(Buffer.from(body, 'base64url').toString()) as Record<string, unknown>;
        const { exp: _exp, ...rest } = claims;
        const signer = new Signer(TEST_SECRET, 'upload');
        const bytes = Buffer.from('bytes');
        for (const bad of [
          `${body}.${sig.slice(1)}A`,
          `${Buffer.from(JSON.stringify({ ...claims, n: 2 })).toString('base64url')}.${sig}`,
          signer.sign(rest, -1),
          new Signer(TEST_SECRET, 'download').sign(rest, 60),
        ]) {
          const r = await fx.transfer(`${u.origin}/upload/${bad}`, {
            method: 'PUT',
            headers: { 'Content-Length': bytes.length },
            body: bytes,
          });
          expect(r.status, r.body.toString()).to.equal(401);
        }
        expect(fx.localBlobs()).to.deep.equal(before);
        // A fresh token of the same claims is accepted (so the refusals above were about the token).
        const ok = await fx.transfer(`${u.origin}/upload/${signer.sign(rest, 60)}`, {
          method: 'PUT',
          headers: { 'Content-Length': bytes.length },
          body: bytes,
        });
        expect(ok.status, ok.body.toString()).to.equal(200);
      });
    }
  });

  describe(`REST files: permissions (${store} store)`, function () {
    this.timeout(30_000);
    const fx = filesFixture(store);
    /** the API-key header of a user with that permission on `shared` (none: no permission at all) */
    const as: Record<'readonly' | 'writeonly' | 'previewonly' | 'none', Record<string, string>> = {
      readonly: {},
      writeonly: {},
      previewonly: {},
      none: {},
    };
    const content = Buffer.from('shared content');

    before(async () => {
      await fx.mkdir('shared/sub');
      await fx.mkdir('shared2');
      await fx.upload('shared/doc.txt', content);
      await fx.upload('shared2/other.txt', Buffer.from('other'));
      for (const level of ['readonly', 'writeonly', 'previewonly', 'none'] as const) {
        const user = await createUser(fx.gw);
        if (level !== 'none') {
          const r = await fx.api('POST', '/permissions', {
            body: { path: 'shared', permission: level, user_id: user.id },
          });
          expect(r.status, r.text).to.equal(201);
        }
        as[level] = keyAuth((await createKey(fx.gw, user.id)).key);
      }
    });

    const READ = [403, 'not-authorized/read-permission-required'] as const;
    const WRITE = [403, 'not-authorized/write-permission-required'] as const;
    const FULL = [403, 'not-authorized/full-permission-required'] as const;
    const expectRefused = (r: Response, [status, type]: readonly [number, string]) =>
      expectError(r, status, type);
    const startAs = (who: Record<string, string>, path: string) =>
      fx.api('POST', fx.files(path), { body: { action: 'put' }, as: who });

    it('readonly: lists and downloads; upload, mkdir, delete and move are 403', async () => {
      const who = as.readonly;
      expect((await fx.list('shared', '', who)).map((e) => e.path)).to.deep.equal([
        'shared/doc.txt',
        'shared/sub',
      ]);
      expect((await fx.stat('shared/doc.txt', who)).status).to.equal(200);
      expect((await fx.download('shared/doc.txt', who)).equals(content)).to.be.true;
      const before = await fx.snapshot();
      expectRefused(await startAs(who, 'shared/new.txt'), WRITE);
      expectRefused(await startAs(who, 'shared/doc.txt'), WRITE);
      expectRefused(await fx.api('POST', fx.folders('shared/newdir'), { as: who }), WRITE);
      expectRefused(await fx.api('DELETE', fx.files('shared/doc.txt'), { as: who }), FULL);
      expectRefused(
        await fx.api('DELETE', fx.files('shared'), { as: who, headers: { Depth: 'infinity' } }),
        FULL,
      );
      expectRefused(
        await fx.api('POST', fx.files('shared/doc.txt'), {
          body: { 'move-destination': 'shared/moved.txt' },
          as: who,
        }),
        FULL,
      );
      expectRefused(
        await fx.api('POST', fx.files('shared/doc.txt'), {
          body: { 'copy-destination': 'shared/copy.txt' },
          as: who,
        }),
        WRITE,
      );
      // A permission on `shared` says nothing about `shared2`.
      expectRefused(await fx.api('GET', fx.folders('shared2'), { as: who }), READ);
      expectRefused(await fx.api('GET', fx.files('shared2/other.txt'), { as: who }), READ);
      expect(await fx.snapshot()).to.deep.equal(before);
    });

    it('writeonly: uploads and creates folders; listing, stat and download are 403', async () => {
      const who = as.writeonly;
      const data = random(5000);
      const { entry } = await fx.upload('shared/from-writer.bin', data, { as: who });
      expect(entry).to.include({ path: 'shared/from-writer.bin', size: 5000 });
      expect((await fx.download('shared/from-writer.bin')).equals(data)).to.be.true;
      await fx.mkdir('shared/writer-dir', who);
      expect(await fx.exists('shared/writer-dir')).to.be.true;
      const before = await fx.snapshot();
      expectRefused(await fx.api('GET', fx.folders('shared'), { as: who }), READ);
      expectRefused(await fx.stat('shared/doc.txt', who), READ);
      expectRefused(await fx.api('GET', fx.files('shared/doc.txt'), { as: who }), READ);
      expectRefused(await fx.api('DELETE', fx.files('shared/from-writer.bin'), { as: who }), FULL);
      expectRefused(await startAs(who, 'shared2/x.txt'), WRITE);
      expect(await fx.snapshot()).to.deep.equal(before);
    });

    it('previewonly: lists and stats; download and upload are 403', async () => {
      const who = as.previewonly;
      expect(await fx.list('shared', '', who)).to.have.length.at.least(2);
      const stat = await fx.stat('shared/doc.txt', who);
      expect(stat.status).to.equal(200);
      expect(stat.json).to.not.have.property('download_uri');
      const before = await fx.snapshot();
      expectRefused(await fx.api('GET', fx.files('shared/doc.txt'), { as: who }), READ);
      expectRefused(await startAs(who, 'shared/preview.txt'), WRITE);
      expectRefused(await fx.api('POST', fx.folders('shared/pdir'), { as: who }), WRITE);
      expectRefused(await fx.api('DELETE', fx.files('shared/doc.txt'), { as: who }), FULL);
      expect(await fx.snapshot()).to.deep.equal(before);
    });

    it('no permission: 403 everywhere, for existing and missing paths alike', async () => {
      const who = as.none;
      const before = await fx.snapshot();
      for (const path of ['shared/doc.txt', 'shared/missing.txt']) {
        expectRefused(await fx.api('GET', fx.folders(path), { as: who }), READ);
        expectRefused(await fx.stat(path, who), READ);
        expectRefused(await fx.api('GET', fx.files(path), { as: who }), READ);
        expectRefused(await startAs(who, path), WRITE);
        expectRefused(await fx.api('POST', fx.folders(`${path}-dir`), { as: who }), WRITE);
        expectRefused(await fx.api('DELETE', fx.files(path), { as: who }), FULL);
        expectRefused(
          await fx.api('POST', fx.files(path), { body: { 'move-destination': 'shared/elsewhere' }, as: who }),
          FULL,
        );
        expectRefused(
          await fx.api('POST', fx.files(path), { body: { 'copy-destination': 'shared/elsewhere' }, as: who }),
          READ,
        );
      }
      expectRefused(await fx.api('GET', '/folders/', { as: who }), READ);
      expect(await fx.snapshot()).to.deep.equal(before);
    });

    it("an upload's ref belongs to whoever started it", async () => {
      const upload = await fx.startUpload('shared/mine.txt', {}, as.writeonly);
      await fx.putPart(upload, Buffer.from('mine'));
      await unchangedBy(fx, async () => {
        expectError(await fx.end('shared/mine.txt', upload.ref), 404, 'not-found/file-upload-not-found');
        const part = await fx.api('POST', fx.files('shared/mine.txt'), {
          body: { action: 'put', ref: upload.ref, part: 1 },
        });
        expectError(part, 404, 'not-found/file-upload-not-found');
      });
      expect((await fx.end('shared/mine.txt', upload.ref, as.writeonly)).status).to.equal(200);
    });
  });
}

async function unchangedBy(fx: ReturnType<typeof filesFixture>, fn: () => Promise<void>): Promise<void> {
  const before = await fx.snapshot();
  await fn();
  expect(await fx.snapshot()).to.deep.equal(before);
}
