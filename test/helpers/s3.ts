/**
 * A real S3-compatible server for tests: @20minutes/s3rver 4.x (the maintained fork of s3rver) in a
 * child process, on 127.0.0.1 and a free port, over a temp directory with one fresh bucket and
 * fresh credentials. A child process keeps its memory out of the tests' measurements and its
 * exceptions out of mocha.
 *
 * Why the fork and not s3rver 3.7.1: 3.7.1 does not check SigV4 signatures at all (a presigned URL
 * with a wrong signature, or a wrong secret key, is accepted, so nothing about signing would be
 * tested) and has no UploadPartCopy. The fork (Node >= 20) checks SigV4 headers and presigned URLs
 * and implements UploadPartCopy. What neither implements is added here, before its router, the way
 * S3 does it:
 * - ListParts (GET ?uploadId) and AbortMultipartUpload (DELETE ?uploadId), both answered
 *   "MethodNotAllowed" by s3rver; they go through s3rver's own signature check.
 * - `Range: bytes=0-0` (and CopySourceRange bytes=0-0): s3rver reads `end || Infinity` and sends the
 *   whole object; S3 sends the first byte.
 * - A full disk (ENOSPC): s3rver answers 500 InternalError; MinIO answers 507 XMinioStorageFull.
 */
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';

/** S3TestServer is a running test server and what a client needs to reach it. */
export interface S3TestServer {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** uploadsInProgress counts multipart uploads neither completed nor aborted (the leak checks). */
  uploadsInProgress(): Promise<number>;
  stop(): Promise<void>;
}

interface ChildSettings {
  directory: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
}

const CHILD_ENV = 'SVC_TEST_S3_SERVER';

/** uploadsDir is where s3rver's filesystem store keeps the parts of unfinished multipart uploads. */
function uploadsDir(directory: string, bucket: string): string {
  return path.join(directory, bucket, '._S3rver_uploads');
}

/**
 * startS3 starts a fresh server; stop() ends it and removes its directory. `parent` is where that
 * directory is made (the system's temp dir by default; a small tmpfs for the full-disk faults).
 */
export async function startS3(parent = os.tmpdir()): Promise<S3TestServer> {
  const directory = await mkdtemp(path.join(parent, 'svc-s3-'));
  const settings: ChildSettings = {
    directory,
    bucket: `svc-test-${randomBytes(4).toString('hex')}`,
    accessKeyId: `AKIA${randomBytes(8).toString('hex').toUpperCase()}`,
    secretAccessKey: randomBytes(20).toString('base64url'),
  };
  const child = fork(fileURLToPath(import.meta.url), [], {
    execArgv: ['--import', import.meta.resolve('tsx')],
    env: { ...process.env, [CHILD_ENV]: JSON.stringify(settings) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) => {
      child.once('message', (m) => resolve((m as { port: number }).port));
      child.once('error', reject);
      child.once('exit', (code, signal) =>
        reject(new Error(`the S3 test server exited before it listened (${signal ?? code})`)),
      );
    });
  } catch (err) {
    child.kill('SIGKILL');
    await rm(directory, { recursive: true, force: true });
    throw err;
  }
  return {
    endpoint: `http://127.0.0.1:${port}`,
    bucket: settings.bucket,
    region: 'us-east-1',
    accessKeyId: settings.accessKeyId,
    secretAccessKey: settings.secretAccessKey,
    async uploadsInProgress() {
      try {
        return (await readdir(uploadsDir(directory, settings.bucket))).length;
      } catch {
        return 0;
      }
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        // A client that still holds a connection keeps server.close() waiting: do not wait for it.
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
      await rm(directory, { recursive: true, force: true });
    },
  };
}

/** CREDENTIAL_ENV are the variables through which the S3 store's SDK reads its credentials. */
const CREDENTIAL_ENV = [
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED',
] as const;

/**
 * useS3Credentials puts a test server's credentials where the S3 store's SDK reads them (the
 * environment, as an operator sets them) and returns the restore of what was there.
 */
export function useS3Credentials(server: S3TestServer): () => void {
  const saved = CREDENTIAL_ENV.map((name) => [name, process.env[name]] as const);
  process.env.AWS_ACCESS_KEY_ID = server.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = server.secretAccessKey;
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  return () => {
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
}

// ---- the child process ----

interface KoaContext {
  path: string;
  method: string;
  query: Record<string, string | string[] | undefined>;
  params: Record<string, string>;
  status: number;
  body: unknown;
}
type Middleware = (ctx: KoaContext, next: () => Promise<void>) => Promise<void>;

interface S3rverObject {
  content: Readable | null;
  range?: { start: number; end: number };
}

interface S3rverStore {
  getResourcePath(bucket: string, key: string | undefined, resource: string): string;
  getObject(
    bucket: string,
    key: string,
    options?: { start?: number; end?: number },
  ): Promise<S3rverObject | null>;
}

interface S3rverApp {
  store: S3rverStore;
  middleware: Middleware[];
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
}

type S3rverClass = new (options: Record<string, unknown>) => S3rverApp;
type S3ErrorClass = new (code: string, message: string, detail?: Record<string, unknown>) => Error;

/** serve runs in the child: s3rver plus the operations it lacks, then reports its port. */
async function serve(settings: ChildSettings): Promise<void> {
  const require = createRequire(import.meta.url);
  const S3rver = require('@20minutes/s3rver') as S3rverClass;
  const { DUMMY_ACCOUNT } = require('@20minutes/s3rver/lib/models/account') as {
    DUMMY_ACCOUNT: { createKeyPair(id: string, secret: string): void; revokeAccessKey(id: string): void };
  };
  const authentication = (require('@20minutes/s3rver/lib/middleware/authentication') as () => Middleware)();
  const S3Error = require('@20minutes/s3rver/lib/models/error') as S3ErrorClass;

  // Only this run's keys are valid, so a test proves the store sends the credentials it was given.
  DUMMY_ACCOUNT.revokeAccessKey('S3RVER');
  DUMMY_ACCOUNT.createKeyPair(settings.accessKeyId, settings.secretAccessKey);

  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: settings.directory,
    vhostBuckets: false,
    configureBuckets: [{ name: settings.bucket }],
  });

  const { store } = server;
  const getObject = store.getObject.bind(store);
  store.getObject = async (bucket, key, options) => {
    const object = await getObject(bucket, key, options);
    if (options?.end === 0 && object?.content) {
      object.content.destroy();
      object.content = createReadStream(store.getResourcePath(bucket, key, 'object'), { start: 0, end: 0 });
      object.range = { start: 0, end: 0 };
    }
    return object;
  };

  const multipart: Middleware = async (ctx, next) => {
    const match = /^\/([^/]+)\/(.+)$/.exec(ctx.path);
    const uploadId = ctx.query.uploadId;
    const listParts = ctx.method === 'GET' && !('partNumber' in ctx.query);
    if (!match || typeof uploadId !== 'string' || !(listParts || ctx.method === 'DELETE')) return next();
    ctx.params = { bucket: decodeURIComponent(match[1]!), key: decodeURIComponent(match[2]!) };
    const { bucket, key } = ctx.params as { bucket: string; key: string };
    await authentication(ctx, async () => {
      const dir = path.join(store.getResourcePath(bucket, undefined, 'uploads'), uploadId);
      const exists = /^[0-9a-f]+$/.test(uploadId) && (await stat(dir).catch(() => null))?.isDirectory();
      if (!exists) {
        throw new S3Error(
          'NoSuchUpload',
          'The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.',
          { UploadId: uploadId },
        );
      }
      if (ctx.method === 'DELETE') {
        await rm(dir, { recursive: true, force: true });
        ctx.status = 204;
        return;
      }
      const names = await readdir(dir);
      // s3rver writes <n>.md5 once part n's body is complete; a part whose client went away
      // mid-body has none, and S3 never lists such a part.
      const numbers = names
        .filter((name) => /^\d+$/.test(name) && names.includes(`${name}.md5`))
        .map(Number)
        .sort((a, b) => a - b);
      const parts = await Promise.all(
        numbers.map(async (n) => {
          const file = path.join(dir, String(n));
          const [info, md5] = await Promise.all([stat(file), readFile(`${file}.md5`, 'utf8')]);
          return { PartNumber: n, LastModified: info.mtime.toISOString(), ETag: `"${md5}"`, Size: info.size };
        }),
      );
      ctx.body = {
        ListPartsResult: {
          '@': { xmlns: 'http://s3.amazonaws.com/doc/2006-03-01/' },
          Bucket: bucket,
          Key: key,
          UploadId: uploadId,
          PartNumberMarker: 0,
          NextPartNumberMarker: numbers.at(-1) ?? 0,
          MaxParts: 10000,
          IsTruncated: false,
          Part: parts,
        },
      };
    });
  };
  // A full disk: s3rver answers any failure 500 InternalError ("Please try again"). An S3-compatible
  // store answers what it is: MinIO 507 XMinioStorageFull, which the gateway knows (errors.ts).
  const storageFull: Middleware = async (_ctx, next) => {
    try {
      await next();
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code !== 'ENOSPC' && code !== 'EDQUOT') throw err;
      const full = new S3Error(
        'XMinioStorageFull',
        'Storage backend has reached its minimum free drive threshold. Please delete a few objects to proceed.',
      ) as Error & { status: number; expose: boolean };
      full.status = 507;
      full.expose = true;
      throw full;
    }
  };
  // s3rver's last middleware is its router; the XML encoder and the mount/vhost handling come before.
  server.middleware.splice(server.middleware.length - 1, 0, storageFull, multipart);

  const address = await server.run();
  process.on('SIGTERM', () => {
    server.close().finally(() => process.exit(0));
  });
  // The test process is gone (killed, crashed): do not outlive it.
  process.on('disconnect', () => process.exit(0));
  process.send!({ port: address.port });
}

const childSettings = process.env[CHILD_ENV];
if (childSettings && process.send) await serve(JSON.parse(childSettings) as ChildSettings);
