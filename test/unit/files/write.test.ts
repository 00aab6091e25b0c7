/**
 * The write pipeline (src/core/files/write.ts) when the client's body fails: whenever it fails, the
 * upload ends with an error for its caller, never an unhandled one that stops the process (a
 * browser tab closed mid-upload did, while the blob's record was still being made).
 */
import { expect } from 'chai';
import { Readable } from 'node:stream';
import { operatorPrincipal } from '../../../src/core/index.ts';
import type { WriteHandle } from '../../../src/core/files/write.ts';
import { openTestCore, type TestCore } from '../../helpers/gateway.ts';

describe('the write pipeline when the body fails', () => {
  let t: TestCore;
  before(async () => {
    t = await openTestCore();
  });
  after(async () => t.close());

  const session = () => t.core.files.session(operatorPrincipal());

  /** failsWholly: put rejects, and once the upload is given up no file of that name appears. */
  const failsWholly = async (handle: WriteHandle, source: Readable, name: string) => {
    const err = await handle.put(source).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err, 'put must reject').to.be.instanceOf(Error);
    await handle.abort();
    expect(
      await session()
        .stat(name)
        .catch(() => null),
    ).to.equal(null);
  };
  const reset = () => Object.assign(new Error('aborted'), { code: 'ECONNRESET' });

  it('a body that fails while the blob is being made (before a byte is read): put rejects, no file', async () => {
    const handle = await session().openWrite('cut-early.bin');
    const source = new Readable({ read() {} });
    // put's first await makes the blob's record; the connection is reset meanwhile.
    setImmediate(() => source.destroy(reset()));
    await failsWholly(handle, source, 'cut-early.bin');
  });

  it('a body that fails after some bytes: put rejects, no file', async () => {
    const handle = await session().openWrite('cut-late.bin');
    let sent = false;
    const source = new Readable({
      read() {
        if (!sent) {
          sent = true;
          this.push(Buffer.alloc(100_000, 1));
        } else this.destroy(reset());
      },
    });
    await failsWholly(handle, source, 'cut-late.bin');
  });
  it('a part upload whose body fails while its record is being made: receivePart rejects, the process goes on', async () => {
    // The web interface's parts go to the gateway's signed URL (local store); a browser closed at
    // that moment stopped the whole gateway (an unhandled error on the part's hasher).
    const upload = await t.core.files.uploads.start(session(), 'part-cut.bin');
    const token = upload.upload_uri.slice(upload.upload_uri.lastIndexOf('/') + 1);
    const body = new Readable({ read() {} });
    const received = t.core.files.uploads.receivePart(token, body, 100_000).then(
      () => null,
      (e: unknown) => e,
    );
    // Cut as soon as receivePart listens to the body, while its first records are being made.
    while (body.listenerCount('error') === 0) await new Promise((r) => setImmediate(r));
    body.destroy(reset());
    expect(await received, 'receivePart must reject').to.be.instanceOf(Error);
    expect(
      await session()
        .stat('part-cut.bin')
        .catch(() => null),
    ).to.equal(null);
  });
});
