import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { ConfigError, loadConfig } from '../../../src/config.ts';
import { createBlobStore } from '../../../src/core/files/blobstores/index.ts';
import { S3BlobStore } from '../../../src/core/files/blobstores/s3.ts';
import { startS3, useS3Credentials, type S3TestServer } from '../../helpers/s3.ts';
import { runBlobStoreContract } from './contract.ts';

// The SDK warns once per process that its releases from 2027 on need Node 22; that is known (the
// lockfile pins the release we use) and not a test result.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

describe('blob store: S3BlobStore against a local S3-compatible server', function () {
  this.timeout(60_000);
  let server: S3TestServer;
  const stores: S3BlobStore[] = [];
  const storeFor = (s: S3TestServer): S3BlobStore => {
    const store = new S3BlobStore({
      bucket: s.bucket,
      region: s.region,
      endpoint: s.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: s.accessKeyId, secretAccessKey: s.secretAccessKey },
    });
    stores.push(store);
    return store;
  };

  before(async () => {
    server = await startS3();
  });
  after(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await server?.stop();
  });

  runBlobStoreContract(
    'S3BlobStore',
    async () => ({
      store: storeFor(server),
      leftovers: async () => {
        const open = await server.uploadsInProgress();
        return open ? [`${open} multipart upload(s) in progress`] : [];
      },
      cleanup: async () => {},
    }),
    { multipart: true },
  );

  it('get of a range sends an S3 Range header, never reading from byte 0', async () => {
    const store = storeFor(server);
    const ranges: (string | null)[] = [];
    store.client.middlewareStack.add(
      (next) => async (args) => {
        const headers = (args.request as { headers?: Record<string, string> }).headers ?? {};
        const name = Object.keys(headers).find((h) => h.toLowerCase() === 'range');
        ranges.push(name ? headers[name]! : null);
        return next(args);
      },
      { step: 'finalizeRequest', name: 'recordRange' },
    );
    const id = randomUUID();
    await store.put(id, Readable.from([Buffer.from('0123456789')]));
    ranges.length = 0;
    await (await store.get(id, { range: { start: 3, end: 5 } })).resume();
    await (await store.get(id, { range: { start: 7 } })).resume();
    await (await store.get(id)).resume();
    expect(ranges).to.deep.equal(['bytes=3-5', 'bytes=7-', null]);
  });

  it('presigned part URLs carry no checksum (AWS would check it against an empty body)', async () => {
    const store = storeFor(server);
    const id = randomUUID();
    const uploadId = await store.createUpload(id);
    const url = new URL(await store.partUrl(id, uploadId, 1, 60));
    const names = [...url.searchParams.keys()].map((k) => k.toLowerCase());
    expect(names.filter((k) => k.includes('checksum'))).to.deep.equal([]);
    expect(url.searchParams.get('X-Amz-Expires')).to.equal('60');
    // The leak check of the contract counts on this: an open upload is seen, an aborted one is gone.
    expect(await server.uploadsInProgress()).to.equal(1);
    await store.abortUpload(id, uploadId);
    expect(await server.uploadsInProgress()).to.equal(0);
  });

  it('is refused by the server with wrong credentials (the server checks SigV4)', async () => {
    const store = storeFor({ ...server, secretAccessKey: 'not-the-secret' });
    let failed = false;
    try {
      await store.size(randomUUID());
    } catch {
      failed = true;
    }
    expect(failed).to.equal(true);
  });

  describe('createBlobStore', () => {
    const s3Env = (bucket: string) => ({
      SVC_STORAGE: 's3',
      SVC_S3_BUCKET: bucket,
      SVC_S3_ENDPOINT: server.endpoint,
      SVC_S3_REGION: server.region,
      SVC_S3_FORCE_PATH_STYLE: 'true',
    });

    it('refuses storage.kind s3 without a bucket, naming the setting', async () => {
      let error: unknown;
      try {
        await createBlobStore(loadConfig(s3Env('')), '/nonexistent');
      } catch (err) {
        error = err;
      }
      expect(error).to.be.instanceOf(ConfigError);
      expect((error as Error).message).to.contain('storage.s3.bucket (SVC_S3_BUCKET)');
    });

    it('opens the bucket with the AWS_* credentials of the environment', async () => {
      const restore = useS3Credentials(server);
      try {
        const store = await createBlobStore(loadConfig(s3Env(server.bucket)), '/nonexistent');
        expect(store).to.be.instanceOf(S3BlobStore);
        const id = randomUUID();
        expect(await store.put(id, Readable.from([Buffer.from('via config')]))).to.deep.equal({ size: 10 });
        expect(await store.size(id)).to.equal(10);
        await store.close();
      } finally {
        restore();
      }
    });

    it('loads the AWS SDK only for storage.kind s3', async () => {
      // A fresh process whose module resolution refuses @aws-sdk/*: kind local must not need it,
      // and kind s3 must (which shows the refusal works).
      const hooks = `export async function resolve(specifier, context, next) {
        if (specifier.startsWith('@aws-sdk/')) throw new Error('AWS SDK loaded: ' + specifier);
        return next(specifier, context);
      }`;
      const src = (file: string) => new URL(`../../../src/${file}`, import.meta.url).href;
      const script = `
        import { register } from 'node:module';
        register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hooks)}));
        const { createBlobStore } = await import(${JSON.stringify(src('core/files/blobstores/index.ts'))});
        const { loadConfig } = await import(${JSON.stringify(src('config.ts'))});
        const local = await createBlobStore(loadConfig({}), '/nonexistent');
        let s3 = 'loaded';
        try {
          await createBlobStore(loadConfig({ SVC_STORAGE: 's3', SVC_S3_BUCKET: 'b' }), '/nonexistent');
        } catch (err) {
          s3 = err.message;
        }
        console.log(JSON.stringify({ local: local.kind, s3 }));
      `;
      const { stdout } = await promisify(execFile)(
        process.execPath,
        ['--import', import.meta.resolve('tsx'), '--input-type=module', '-e', script],
        { env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' } },
      );
      const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as { local: string; s3: string };
      expect(result.local).to.equal('local');
      expect(result.s3).to.match(/^AWS SDK loaded: @aws-sdk\//);
    });
  });
});
