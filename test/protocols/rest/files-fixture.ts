/**
 * Shared fixture of the REST file tests (files.test.ts, files-upload.test.ts, files-errors.test.ts):
 * a whole gateway over real HTTPS on the local blob store or on a real S3-compatible server
 * (test/helpers/s3.ts), and a client that does what a REST client does — percent-encoded paths,
 * SPEC's multi-step upload honoring the Upload object's `send`, `headers` and `http_method`, and
 * downloads through the signed download_uri. Every scenario runs once per store (`STORES`).
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { expect } from 'chai';
import type { FindOptionsWhere } from 'typeorm';
import { SPARES } from '../../../src/core/files/spares.ts';
import { ActionEntity, FileEntity, type ActionRow } from '../../../src/db/entities.ts';
import { startTestGateway, type Response, type TestGateway } from '../../helpers/gateway.ts';
import { startS3, type S3TestServer } from '../../helpers/s3.ts';
import { API, keyAuth } from './client.ts';
import { dbOf, filesOf } from '../../helpers/internals.ts';

/** StoreKind names a blob store the file tests run against. */
export type StoreKind = 'local' | 's3';
/** STORES are the blob stores every file scenario runs against. */
export const STORES: readonly StoreKind[] = ['local', 's3'];

/** MiB is 1024 * 1024 bytes; SPEC's 5 MB part minimum is 5 MiB here (uploads.ts MIN_PART). */
export const MiB = 1024 * 1024;

/** TEST_SECRET is the site secret of the test gateways, so a test can sign (expired) tokens itself. */
export const TEST_SECRET = 'files-test-secret-0123456789abcdef';

/** UploadObject is SPEC's Upload object as a client reads it. */
export interface UploadObject {
  ref: string;
  path: string;
  action: string;
  ask_about_overwrites: boolean;
  http_method: string;
  upload_uri: string;
  partsize: number;
  part_number: number;
  available_parts: number;
  send: Record<string, string>;
  headers: Record<string, string>;
  parameters: Record<string, string>;
}

/** FileEntry is SPEC's file or folder entry as a client reads it (JSON). */
export interface FileEntry {
  path: string;
  type: 'file' | 'directory';
  size: number | null;
  mtime: string;
  crc32: string | null;
  md5: string | null;
  download_uri?: string;
}

/** RawResponse is an answer of a signed transfer URL (bytes, not JSON). */
export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** md5 is the hex md5 of some bytes. */
export function md5(data: Buffer): string {
  return createHash('md5').update(data).digest('hex');
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

/** crc32 is the CRC-32 (IEEE, as zlib) of some bytes as 8 lowercase hex digits, computed independently of the gateway. */
export function crc32(data: Buffer): string {
  let c = 0xffffffff;
  for (const byte of data) c = CRC_TABLE[(c ^ byte) & 0xff]! ^ (c >>> 8);
  return ((c ^ 0xffffffff) >>> 0).toString(16).padStart(8, '0');
}

/** random makes `n` random bytes. */
export const random = (n: number): Buffer => randomBytes(n);

/** sleep waits `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** enc percent-encodes a file path segment by segment (SPEC "Path encoding"). */
export function enc(p: string): string {
  return p
    .split('/')
    .map((s) => encodeURIComponent(s))
    .join('/');
}

/** FilesFixture is one gateway on one store, and a REST client of it. */
export class FilesFixture {
  gw!: TestGateway;
  s3: S3TestServer | null = null;
  /** the site-wide key's header */
  auth: Record<string, string> = {};
  private ca!: Buffer;

  constructor(readonly store: StoreKind) {}

  /**
   * start starts the S3 server (for s3) and the gateway; called from a `before` hook. `extra`
   * settings go on top (the cross-protocol scenarios add the other listeners).
   */
  async start(extra: Record<string, unknown> = {}): Promise<void> {
    let overrides: Record<string, unknown> = { secret: TEST_SECRET, ...extra };
    if (this.store === 's3') {
      this.s3 = await startS3();
      // The S3 store reads its credentials through the SDK's default chain (blobstores/index.ts).
      process.env.AWS_ACCESS_KEY_ID = this.s3.accessKeyId;
      process.env.AWS_SECRET_ACCESS_KEY = this.s3.secretAccessKey;
      process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
      overrides = {
        ...overrides,
        storage: {
          kind: 's3',
          s3: {
            bucket: this.s3.bucket,
            endpoint: this.s3.endpoint,
            region: 'us-east-1',
            force_path_style: true,
          },
        },
      };
    }
    this.gw = await startTestGateway(overrides);
    this.ca = readFileSync(path.join(this.gw.config.data_dir, 'tls', 'cert.pem'));
    this.auth = keyAuth(this.gw.siteKey);
  }

  async stop(): Promise<void> {
    await this.gw?.stop();
    await this.s3?.stop();
  }

  /** api sends a request to /api/rest/v1<rest> with the site-wide key unless other headers say otherwise. */
  api(
    method: string,
    rest: string,
    opts: { headers?: Record<string, string>; body?: unknown; as?: Record<string, string> } = {},
  ): Promise<Response> {
    return this.gw.request(method, `${API}${rest}`, {
      headers: { ...(opts.as ?? this.auth), ...(opts.headers ?? {}) },
      ...(opts.body === undefined ? {} : { body: opts.body }),
    });
  }

  /** files is the /files URL of a path, percent-encoded. */
  files(p: string, query = ''): string {
    return `/files/${enc(p)}${query}`;
  }

  /** folders is the /folders URL of a path, percent-encoded. */
  folders(p: string, query = ''): string {
    return `/folders/${enc(p)}${query}`;
  }

  /** mkdir creates a folder (and its parents) and expects 201 []. */
  async mkdir(p: string, as?: Record<string, string>): Promise<void> {
    const r = await this.api('POST', this.folders(p), as ? { as } : {});
    expect(r.status, `POST /folders/${p}: ${r.text}`).to.equal(201);
    expect(r.json).to.deep.equal([]);
  }

  /** list lists a folder and expects 200. */
  async list(p: string, query = '', as?: Record<string, string>): Promise<FileEntry[]> {
    const r = await this.api('GET', this.folders(p, query), as ? { as } : {});
    expect(r.status, `GET /folders/${p}${query}: ${r.text}`).to.equal(200);
    expect(r.json).to.be.an('array');
    return r.json as FileEntry[];
  }

  /** names lists a folder and returns the last segment of each entry's path. */
  async names(p: string, query = ''): Promise<string[]> {
    return (await this.list(p, query)).map((e) => e.path.slice(e.path.lastIndexOf('/') + 1));
  }

  /** stat answers GET /files/<p>?action=stat (any status). */
  stat(p: string, as?: Record<string, string>): Promise<Response> {
    return this.api('GET', this.files(p, '?action=stat'), as ? { as } : {});
  }

  /** exists tells whether a path exists, by stat. */
  async exists(p: string): Promise<boolean> {
    const r = await this.stat(p);
    if (r.status === 404) return false;
    expect(r.status, r.text).to.equal(200);
    return true;
  }

  /** startUpload sends action=put (with `restart` when given) and expects an Upload object. */
  async startUpload(
    p: string,
    fields: Record<string, unknown> = {},
    as?: Record<string, string>,
  ): Promise<UploadObject> {
    const r = await this.api('POST', this.files(p), {
      body: { action: 'put', ...fields },
      ...(as ? { as } : {}),
    });
    expect(r.status, `action=put ${p}: ${r.text}`).to.equal(200);
    return r.json as UploadObject;
  }

  /** partUrl asks for the URL of part `part` of an upload. */
  async partUrl(p: string, ref: string, part: number, as?: Record<string, string>): Promise<UploadObject> {
    const r = await this.api('POST', this.files(p), {
      body: { action: 'put', ref, part },
      ...(as ? { as } : {}),
    });
    expect(r.status, `action=put part ${part} of ${p}: ${r.text}`).to.equal(200);
    return r.json as UploadObject;
  }

  /** endUpload sends action=end (any status). */
  end(p: string, ref: string, as?: Record<string, string>): Promise<Response> {
    return this.api('POST', this.files(p), { body: { action: 'end', ref }, ...(as ? { as } : {}) });
  }

  /** transfer sends one request to a full URL: the gateway's over HTTPS (its own certificate), S3's over HTTP. */
  transfer(
    url: string,
    opts: { method?: string; headers?: Record<string, string | number>; body?: Buffer } = {},
  ): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
      const req = this.openTransfer(url, opts.method ?? 'GET', opts.headers ?? {}, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(opts.body);
    });
  }

  /** openTransfer starts a request to a full URL without sending its body (for streaming tests). */
  openTransfer(
    url: string,
    method: string,
    headers: Record<string, string | number>,
    onResponse: (res: http.IncomingMessage) => void,
  ): http.ClientRequest {
    const u = new URL(url);
    const options = {
      host: u.hostname,
      port: u.port,
      path: `${u.pathname}${u.search}`,
      method,
      headers,
      agent: false as const,
    };
    if (u.protocol === 'https:')
      return https.request({ ...options, ca: this.ca, servername: 'localhost' }, onResponse);
    return http.request(options, onResponse);
  }

  /**
   * partRequest builds what SPEC's Upload object asks for: the method, the required headers with
   * their exact values, and the data placed where `send` says (only `body` and `required-header`
   * placements are used by this gateway; anything else fails the test).
   */
  partRequest(
    upload: UploadObject,
    data: Buffer,
  ): { method: string; headers: Record<string, string | number> } {
    const headers: Record<string, string | number> = { ...upload.headers };
    for (const [what, where] of Object.entries(upload.send)) {
      const value =
        what === 'partsize' ? data.length : what === 'Content-Type' ? 'application/octet-stream' : null;
      if (where === 'body') {
        expect(['partdata', 'file'], `send.${what} = body`).to.include(what);
      } else if (where.startsWith('required-header ')) {
        expect(value, `send.${what}`).to.not.equal(null);
        headers[where.slice('required-header '.length)] = value!;
      } else {
        expect.fail(`send.${what} = ${where}: placement not handled by this client`);
      }
    }
    expect(upload.parameters).to.deep.equal({});
    return { method: upload.http_method, headers };
  }

  /** putPart sends one part to its upload_uri and expects 200. */
  async putPart(upload: UploadObject, data: Buffer): Promise<RawResponse> {
    const { method, headers } = this.partRequest(upload, data);
    const r = await this.transfer(upload.upload_uri, { method, headers, body: data });
    expect(r.status, `PUT part ${upload.part_number}: ${r.body.toString()}`).to.equal(200);
    return r;
  }

  /** upload runs the whole multi-step upload of `parts` (one part each) and returns the final entry. */
  async upload(
    p: string,
    parts: Buffer[] | Buffer,
    opts: { restart?: number; as?: Record<string, string> } = {},
  ): Promise<{ upload: UploadObject; entry: FileEntry }> {
    const list = Buffer.isBuffer(parts) ? [parts] : parts;
    const upload = await this.startUpload(
      p,
      opts.restart === undefined ? {} : { restart: opts.restart },
      opts.as,
    );
    for (let i = 0; i < list.length; i++) {
      const target = i === 0 ? upload : await this.partUrl(p, upload.ref, i + 1, opts.as);
      await this.putPart(target, list[i]!);
    }
    const r = await this.end(p, upload.ref, opts.as);
    expect(r.status, `action=end ${p}: ${r.text}`).to.equal(200);
    return { upload, entry: r.json as FileEntry };
  }

  /** downloadUri answers GET /files/<p> with its download_uri, expecting 200. */
  async downloadUri(p: string, as?: Record<string, string>): Promise<string> {
    const r = await this.api('GET', this.files(p), as ? { as } : {});
    expect(r.status, `GET /files/${p}: ${r.text}`).to.equal(200);
    expect(r.json.download_uri).to.be.a('string');
    return r.json.download_uri as string;
  }

  /** download reads a file's bytes through its download_uri. */
  async download(p: string, as?: Record<string, string>): Promise<Buffer> {
    const r = await this.transfer(await this.downloadUri(p, as));
    expect(r.status, `download of ${p}: ${r.body.toString().slice(0, 200)}`).to.equal(200);
    return r.body;
  }

  /** actions reads the Action rows (newest last) matching `where`. */
  actions(where: FindOptionsWhere<ActionRow>): Promise<ActionRow[]> {
    return dbOf(this.gw.core).read((em) => em.find(ActionEntity, { where, order: { id: 'ASC' } }));
  }

  /** snapshot is the whole namespace and the number of Actions, to show a refused request changed nothing. */
  async snapshot(): Promise<{ rows: string[]; actions: number }> {
    return dbOf(this.gw.core).read(async (em) => ({
      rows: (await em.find(FileEntity, { order: { path: 'ASC' } })).map(
        (r) => `${r.path}|${r.type}|${r.size}|${r.blob_id}|${r.md5}|${r.mtime.getTime()}`,
      ),
      actions: await em.count(ActionEntity),
    }));
  }

  /** blobIdOf is the blob a file's row points at. */
  async blobIdOf(p: string): Promise<string> {
    const row = await dbOf(this.gw.core).read((em) => em.findOneBy(FileEntity, { path: p }));
    expect(row?.blob_id, `blob of ${p}`).to.be.a('string');
    return row!.blob_id!;
  }

  /** referencedBlobs lists the blobs file rows point at. */
  async referencedBlobs(): Promise<Set<string>> {
    const rows = await dbOf(this.gw.core).read((em) => em.find(FileEntity));
    return new Set(rows.map((r) => r.blob_id).filter((b): b is string => !!b));
  }

  /**
   * localBlobs lists the blob files under <data_dir>/blobs (local store only). The empty files
   * made ahead in spare/'s subfolders (spares.ts) are not blobs: listed only when more than
   * SPARES, or one has bytes, which would be a leak.
   */
  localBlobs(): string[] {
    const root = path.join(this.gw.config.data_dir, 'blobs');
    const out: string[] = [];
    let dirs: string[];
    try {
      dirs = readdirSync(root);
    } catch {
      return out;
    }
    for (const d of dirs) {
      const files = (readdirSync(path.join(root, d), { recursive: true }) as string[]).filter((f) =>
        statSync(path.join(root, d, f)).isFile(),
      );
      const spare = d === 'spare' && files.length <= SPARES;
      for (const f of files)
        if (!spare || statSync(path.join(root, d, f)).size > 0) out.push(path.basename(f));
    }
    return out.sort();
  }

  /** collectGarbage waits for the reclaims under way, then runs the core's safety-net collection. */
  async collectGarbage(): Promise<number> {
    await filesOf(this.gw.core).blobs.idle();
    return filesOf(this.gw.core).collectGarbage();
  }
}

/**
 * filesFixture registers before/after hooks in the current describe that start a gateway on
 * `store` (and the S3 server for s3, with its credentials in AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY, which the S3 store reads through the SDK's default chain), and returns the
 * fixture the tests use once `before` has run.
 */
export function filesFixture(store: StoreKind): FilesFixture {
  const fx = new FilesFixture(store);
  const saved: Record<string, string | undefined> = {};
  const env = [
    'AWS_ACCESS_KEY_ID',
    'AWS_SECRET_ACCESS_KEY',
    'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED',
  ];
  before(async function () {
    this.timeout(60_000);
    for (const k of env) saved[k] = process.env[k];
    await fx.start();
  });
  after(async () => {
    await fx.stop();
    for (const k of env) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  });
  return fx;
}
