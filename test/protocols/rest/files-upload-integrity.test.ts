/**
 * Issue 11's two REST data-loss cases, over real HTTPS: an `action=end` after a part that was cut
 * off must not commit the file without that part (it committed a 0-byte file over the old content),
 * and an `end` retried after a failed commit must give a file whose bytes are there.
 */
import { expect } from 'chai';
import { expectError } from './client.ts';
import { filesFixture, random, sleep, STORES } from './files-fixture.ts';

for (const store of STORES) {
  describe(`REST files: upload end keeps data whole (${store} store)`, function () {
    this.timeout(30_000);
    const fx = filesFixture(store);

    before(async () => {
      await fx.mkdir('whole');
    });

    if (store === 'local') {
      it('a part cut off mid-body: end is 422 file-not-uploaded and keeps the old file; the part sent again, end commits', async () => {
        const old = Buffer.from('the old content');
        await fx.upload('whole/cut.bin', old);
        const data = random(2 * 1024 * 1024);
        const upload = await fx.startUpload('whole/cut.bin');
        const { method, headers } = fx.partRequest(upload, data);
        // Half the body, then the connection is cut (a client that lost its network).
        await new Promise<void>((resolve) => {
          const req = fx.openTransfer(upload.upload_uri, method, headers, () => undefined);
          req.on('error', () => resolve());
          req.on('close', () => resolve());
          req.write(data.subarray(0, data.length / 2), () => {
            setTimeout(() => req.destroy(), 200);
          });
        });
        // The gateway notices the cut when its read of the body fails.
        await sleep(300);

        const end = await fx.end('whole/cut.bin', upload.ref);
        expectError(end, 422, 'processing-failure/file-not-uploaded');
        expect(end.json.error).to.match(/part 1/i);
        expect((await fx.download('whole/cut.bin')).equals(old)).to.be.true;
        // The upload is kept: the same part sent again completes it.
        await fx.putPart(upload, data);
        const again = await fx.end('whole/cut.bin', upload.ref);
        expect(again.status, again.text).to.equal(200);
        expect((await fx.download('whole/cut.bin')).equals(data)).to.be.true;
        const writes = (await fx.actions({ path: 'whole/cut.bin' })).filter((a) => a.action === 'update');
        expect(writes).to.have.length(1);
      });
    }

    it('an end whose commit failed (the folder was deleted) can be retried once the folder is back: the file downloads', async () => {
      await fx.mkdir('whole/gone');
      const data = random(70_000);
      const upload = await fx.startUpload('whole/gone/one-part.bin');
      await fx.putPart(upload, data);
      const del = await fx.api('DELETE', fx.files('whole/gone', '?recursive=true'));
      expect(del.status, del.text).to.be.oneOf([200, 204]);
      expectError(
        await fx.end('whole/gone/one-part.bin', upload.ref),
        422,
        'processing-failure/destination-parent-does-not-exist',
      );
      // Garbage collection in between must not take the part the failed end had adopted.
      await fx.collectGarbage();
      await fx.mkdir('whole/gone');
      const again = await fx.end('whole/gone/one-part.bin', upload.ref);
      expect(again.status, again.text).to.equal(200);
      await fx.collectGarbage();
      expect((await fx.download('whole/gone/one-part.bin')).equals(data)).to.be.true;
    });
  });
}
