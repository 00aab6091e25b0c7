/**
 * SPEC's multi-step upload (Upload object, "Upload lifecycle"): start (`action=put`, optionally
 * `restart=<bytes>`), a signed URL per part, parts sent to those URLs, then `action=end`. Upload
 * state lives in the database, so an upload started on one instance can finish on another.
 *
 * Local store: the gateway itself receives each part at its signed URL and keeps it as a blob; the
 * end streams the kept bytes and the parts, in order, into the file's new blob (md5 and crc32
 * computed on the way). S3 store: parts go straight to S3 by presigned UploadPart URLs and the end
 * completes the multipart upload; kept bytes are copied server-side (UploadPartCopy). A restart
 * below S3's 5 MiB part minimum cannot be a part of its own: the gateway receives the client's
 * first part and sends it to S3 behind the kept bytes; later parts go straight to S3.
 */
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { In, LessThan, type EntityManager } from 'typeorm';
import { UploadEntity, UploadPartEntity, type FileRow, type UploadRow } from '../../db/entities.ts';
import { rowOf, sql } from '../../db/sql.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import { isMultipartStore, type BlobStore, type MultipartBlobStore, type UploadedPart } from './blobstore.ts';
import type { Blobs } from './blobs.ts';
import { getRow, markGarbage, type Entry } from './namespace.ts';
import type { FileSession } from './session.ts';
import { Signer, UPLOAD_TTL_S } from './signed.ts';
import { Hasher } from './checksum.ts';
import { ByteCounter, concat, newBlobId } from './transfers.ts';

/** SPEC limits: parts of 5 MB to 5 GB (but the last), at most 10,000 parts, files up to 5 TB. */
export const MIN_PART = 5 * 1024 * 1024;
export const MAX_PART = 5 * 1024 ** 3;
export const MAX_PARTS = 10_000;
export const MAX_FILE = 5 * 1024 ** 4;
/**
 * COMPLETED stands for the store's upload id once the object store has assembled the parts: the
 * object exists and only the commit is left (a retried end adopts it).
 */
const COMPLETED = 'completed';
/** RECEIVING is the size of a part whose bytes are still arriving, or stopped arriving (a failed send). */
const RECEIVING = -1;
/** RECOMMENDED_PART is the part size the Upload object suggests: large enough for speed, small enough to retry. */
export const RECOMMENDED_PART = 64 * 1024 * 1024;
// An upload not finished within a day is abandoned and its parts collected.
const UPLOAD_LIFETIME_MS = 24 * 3600 * 1000;

// The statements of an upload's three steps are written by hand (db/sql.ts): TypeORM's query
// builder took about 1 ms of the event loop for the dozen an upload of a small file runs, more
// than SQLite took to run them (issue 13, the REST row). rowOf reads their rows as TypeORM would.
const UPLOAD_COLUMNS =
  'ref, path, user_id, api_key_id, interface, ip, blob_id, store_upload_id, restart, ' +
  'restart_blob_id, reserved_parts, created_at, expires_at';
const PART_COLUMNS = 'ref, part_number, blob_id, size, md5, crc32';

/** findUpload reads upload `ref`, or null. */
async function findUpload(em: EntityManager, ref: string): Promise<UploadRow | null> {
  const [row] = await sql<Record<string, unknown>>(
    em,
    `SELECT ${UPLOAD_COLUMNS} FROM uploads WHERE ref = ?`,
    [ref],
  );
  return row ? rowOf(UploadEntity, row) : null;
}

/** Upload is SPEC's Upload object. */
export interface Upload {
  ref: string;
  path: string;
  action: 'put/write';
  ask_about_overwrites: boolean;
  http_method: 'PUT';
  upload_uri: string;
  partsize: number;
  part_number: number;
  available_parts: number;
  send: Record<string, string>;
  headers: Record<string, string>;
  parameters: Record<string, string>;
  expires: Date;
}

interface PartClaims {
  ref: string;
  /** the store's part number (client part + reserved parts) */
  n: number;
}

/** Uploads runs multi-step uploads for every session. */
export class Uploads {
  private readonly signer: Signer;

  constructor(
    private readonly ctx: CoreContext,
    private readonly store: BlobStore,
    private readonly blobs: Blobs,
  ) {
    this.signer = new Signer(ctx.secret, 'upload');
  }

  /** start opens an upload of `path`; `restart` keeps that many bytes of the current content. */
  async start(session: FileSession, path: string, restart?: number): Promise<Upload> {
    const handle = await session.openWrite(path);
    const { site, existing, pending } = handle;
    await handle.abort(); // only its checks were wanted: the end opens its own
    const keep = restart ?? 0;
    // To a user with a cut upload of the path (pending.ts), the current content is that pending
    // version, whose size their stat shows: a restart continues it.
    const current = pending ? { size: pending.size, blob_id: pending.blob_id } : existing;
    if (!Number.isInteger(keep) || keep < 0 || keep > (current?.size ?? 0)) {
      throw new GatewayError(
        'bad-request/invalid-upload-offset',
        `restart must be from 0 to the current size, ${current?.size ?? 0}`,
      );
    }
    // S3 copies kept bytes into parts of their own, but no part but the last may be under 5 MiB.
    // A smaller restart (SPEC sets no lower bound) reserves no part: the gateway receives the
    // client's first part itself and sends it to S3 behind the kept bytes (see receivePart).
    const carried = isMultipartStore(this.store) && keep > 0 && keep < MIN_PART;
    const reserved = keep > 0 && !carried ? Math.ceil(keep / MAX_PART) : 0;
    const blobId = newBlobId();
    let storeUploadId: string | null = null;
    if (isMultipartStore(this.store)) {
      storeUploadId = await this.store.createUpload(blobId);
      // Equal copy parts, so none but the last client part is below S3's 5 MiB minimum.
      const copySize = Math.ceil(keep / Math.max(reserved, 1));
      for (let i = 0; i < reserved; i++) {
        const start = i * copySize;
        await this.store.copyPart(blobId, storeUploadId, i + 1, current!.blob_id!, {
          start,
          end: Math.min(keep, start + copySize) - 1,
        });
      }
    }
    const p = session.principal;
    const row: UploadRow = {
      ref: randomBytes(16).toString('hex'),
      path: site,
      user_id: p.user?.id ?? null,
      api_key_id: p.apiKey?.id ?? null,
      interface: p.interface,
      ip: p.ip,
      blob_id: blobId,
      store_upload_id: storeUploadId,
      restart: keep,
      restart_blob_id: keep > 0 ? current!.blob_id : null,
      reserved_parts: reserved,
      created_at: new Date(),
      expires_at: new Date(Date.now() + UPLOAD_LIFETIME_MS),
    };
    await this.ctx.db.work((em) =>
      sql(em, `INSERT INTO uploads (${UPLOAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, [
        row.ref,
        row.path,
        row.user_id,
        row.api_key_id,
        row.interface,
        row.ip,
        row.blob_id,
        row.store_upload_id,
        row.restart,
        row.restart_blob_id,
        row.reserved_parts,
        row.created_at.getTime(),
        row.expires_at.getTime(),
      ]),
    );
    return this.describe(session, row, 1, existing);
  }

  /** partUrl gives a fresh signed URL for client part `part` (1..available_parts), e.g. to retry it. */
  async partUrl(session: FileSession, path: string, ref: string, part: number): Promise<Upload> {
    const row = await this.find(session, ref, path);
    const available = MAX_PARTS - row.reserved_parts;
    if (!Number.isInteger(part) || part < 1)
      throw new GatewayError('bad-request/request-params-invalid', 'part must be a positive integer');
    if (part > available)
      throw new GatewayError('bad-request/part-number-too-large', `part must be at most ${available}`);
    // SPEC: ask_about_overwrites is true while a file of that name exists, in every Upload object.
    const existing = await this.ctx.db.read((em) => getRow(em, row.path));
    return this.describe(session, row, part, existing);
  }

  private async describe(
    session: FileSession,
    row: UploadRow,
    part: number,
    existing: FileRow | null | undefined,
  ): Promise<Upload> {
    const n = part + row.reserved_parts;
    let uri: string;
    if (this.carries(row) && n === 1)
      uri = `${this.ctx.config.public_url}/upload/${this.signer.sign({ ref: row.ref, n } satisfies PartClaims, UPLOAD_TTL_S)}`;
    else if (row.store_upload_id && row.store_upload_id !== COMPLETED && isMultipartStore(this.store))
      uri = await this.store.partUrl(row.blob_id, row.store_upload_id, n, UPLOAD_TTL_S);
    else
      uri = `${this.ctx.config.public_url}/upload/${this.signer.sign({ ref: row.ref, n } satisfies PartClaims, UPLOAD_TTL_S)}`;
    return {
      ref: row.ref,
      path: session.visible(row.path),
      action: 'put/write',
      ask_about_overwrites: existing !== undefined ? existing !== null : false,
      http_method: 'PUT',
      upload_uri: uri,
      partsize: RECOMMENDED_PART,
      part_number: part,
      available_parts: MAX_PARTS - row.reserved_parts,
      send: { partsize: 'required-header Content-Length', partdata: 'body' },
      headers: {},
      parameters: {},
      expires: new Date(Date.now() + UPLOAD_TTL_S * 1000),
    };
  }

  private async find(session: FileSession, ref: string, path: string): Promise<UploadRow> {
    const site = session.site(path);
    const row =
      typeof ref === 'string' && /^[0-9a-f]{32}$/.test(ref)
        ? await this.ctx.db.read((em) => findUpload(em, ref))
        : null;
    const p = session.principal;
    // Another user's upload is as good as no upload: refs are not shared.
    if (
      !row ||
      row.path !== site ||
      row.user_id !== (p.user?.id ?? null) ||
      row.expires_at.getTime() < Date.now()
    ) {
      throw new GatewayError(
        'not-found/file-upload-not-found',
        'No upload in progress with this ref for this path',
      );
    }
    return row;
  }

  /**
   * receivePart stores one part sent to a gateway-signed URL (local store). `length` is the
   * request's Content-Length, which SPEC's `send` requires.
   */
  async receivePart(
    token: string,
    body: Readable,
    length: number | undefined,
    signal?: AbortSignal,
  ): Promise<{ etag: string; size: number }> {
    const claims = this.signer.verify<PartClaims>(token);
    if (length === undefined)
      throw new GatewayError(
        'bad-request/request-params-required',
        'Content-Length is required for an upload part',
      );
    if (length > MAX_PART)
      throw new GatewayError(
        'bad-request/invalid-upload-part-size',
        `A part may be at most ${MAX_PART} bytes`,
      );
    const upload = await this.ctx.db.read((em) => findUpload(em, claims.ref));
    if (!upload || upload.expires_at.getTime() < Date.now())
      throw new GatewayError('not-found/file-upload-not-found', 'This upload no longer exists');
    if (this.carries(upload) && claims.n === 1) return this.receiveCarried(upload, body, length, signal);
    const hasher = new Hasher();
    // Listened to before the first await: a body that fails meanwhile must not be unhandled, and
    // neither may the hasher's error it passes on: until the store has the hasher, an 'error' on it
    // with no listener stopped the process (a browser closed while a part's record was being made).
    // The failure reaches this caller through the store's put, or the check before it.
    hasher.on('error', () => undefined);
    body.once('error', (err) => hasher.destroy(err));
    const blob = await this.blobs.create();
    const blobId = blob.blobId;
    // The part is recorded as begun (size RECEIVING) before its bytes: if they never all arrive (a
    // cut connection, a full disk, a crash), `end` refuses with file-not-uploaded until the part is
    // sent again, instead of committing the file without it (issue 11). The old part it replaces
    // is given up now: it is being replaced whatever happens.
    try {
      await this.ctx.db.work(async (em) => {
        if ((await sql(em, 'SELECT 1 FROM uploads WHERE ref = ?', [claims.ref])).length === 0)
          throw new GatewayError('not-found/file-upload-not-found', 'This upload no longer exists');
        await this.dropPart(em, claims.ref, claims.n);
        await sql(em, `INSERT INTO upload_parts (${PART_COLUMNS}) VALUES (?, ?, ?, ?, '', '')`, [
          claims.ref,
          claims.n,
          blobId,
          RECEIVING,
        ]);
      });
    } catch (err) {
      body.resume();
      await this.blobs.discard(blobId, blob).catch(() => undefined);
      throw err;
    }
    let failure: unknown = null;
    try {
      // A body that failed or was cut while the records were made: the store would wait for it forever.
      if (body.destroyed || hasher.destroyed)
        throw body.errored ?? hasher.errored ?? new Error('The body ended before it was read');
      await this.store.put(blobId, body.pipe(hasher), signal ? { signal } : {});
      if (hasher.bytes !== length)
        failure = new GatewayError(
          'bad-request/invalid-body',
          `Received ${hasher.bytes} bytes, Content-Length said ${length}`,
        );
    } catch (err) {
      failure = err;
    }
    if (failure) {
      hasher.discard();
      // The begun mark stays (end must refuse); the bytes go.
      await this.blobs.discard(blobId, blob);
      throw failure;
    }
    const { md5, crc32 } = await hasher.digest();
    try {
      await this.ctx.db.work(async (em) => {
        const updated = await sql(
          em,
          'UPDATE upload_parts SET size = ?, md5 = ?, crc32 = ? ' +
            'WHERE ref = ? AND part_number = ? AND blob_id = ? RETURNING part_number',
          [hasher.bytes, md5, crc32, claims.ref, claims.n, blobId],
        );
        // The upload ended or expired meanwhile, or the same part was sent again and won.
        if (updated.length === 0)
          throw new GatewayError('not-found/file-upload-not-found', 'This upload no longer exists');
        await this.blobs.settle(em, blob);
      });
    } catch (err) {
      await this.blobs.discard(blobId, blob).catch(() => undefined);
      throw err;
    }
    return { etag: md5, size: hasher.bytes };
  }

  /**
   * carries tells whether an S3 upload's first part goes through the gateway: a restart below the
   * 5 MiB part minimum, whose kept bytes lead that part.
   */
  private carries(row: UploadRow): boolean {
    return (
      !!row.store_upload_id &&
      row.store_upload_id !== COMPLETED &&
      row.restart > 0 &&
      row.reserved_parts === 0 &&
      isMultipartStore(this.store)
    );
  }

  /**
   * receiveCarried sends S3 part 1 of a small restart: the kept bytes, then the client's part. It
   * is marked as being received meanwhile, so an end after a cut refuses (file-not-uploaded) rather
   * than completing without it; S3's own list of parts is the record once it is there.
   */
  private async receiveCarried(
    upload: UploadRow,
    body: Readable,
    length: number,
    signal?: AbortSignal,
  ): Promise<{ etag: string; size: number }> {
    const store = this.store as MultipartBlobStore;
    const mark = { ref: upload.ref, part_number: 1 };
    await this.ctx.db.work(async (em) => {
      await this.dropPart(em, upload.ref, 1);
      await em.insert(UploadPartEntity, {
        ...mark,
        blob_id: upload.blob_id,
        size: RECEIVING,
        md5: '',
        crc32: '',
      });
    });
    const counter = new ByteCounter();
    // The body reaches the counter only after the kept bytes: its error must not be unhandled there.
    counter.on('error', () => undefined);
    body.once('error', (err) => counter.destroy(err));
    const kept = () =>
      this.blobs.open(upload.restart_blob_id!, { range: { start: 0, end: upload.restart - 1 } });
    const part = await store.putPart(
      upload.blob_id,
      upload.store_upload_id!,
      1,
      concat([kept, () => body.pipe(counter)]),
      { size: upload.restart + length, ...(signal ? { signal } : {}) },
    );
    if (counter.bytes !== length)
      throw new GatewayError(
        'bad-request/invalid-body',
        `Received ${counter.bytes} bytes, Content-Length said ${length}`,
      );
    await this.ctx.db.work((em) => em.delete(UploadPartEntity, mark));
    return { etag: part.etag, size: length };
  }

  /** dropPart removes part `n` of upload `ref`, if any; its blob becomes garbage. */
  private async dropPart(em: EntityManager, ref: string, n: number): Promise<void> {
    const old = await sql<{ blob_id: string }>(
      em,
      'DELETE FROM upload_parts WHERE ref = ? AND part_number = ? RETURNING blob_id',
      [ref, n],
    );
    await markGarbage(
      em,
      old.map((p) => p.blob_id),
    );
  }

  /** end joins the kept bytes and the parts into the file and commits it (SPEC `action=end`). */
  async end(session: FileSession, path: string, ref: string): Promise<Entry> {
    const row = await this.find(session, ref, path);
    // The file's checks (rights, locks, parent) again now; the commit repeats them in its tree change.
    const handle = await session.openWrite(path);
    // The upload goes in the commit's own unit of work: a file gets one commit per upload, and of
    // two ends at once the second finds no upload and changes nothing.
    const ended = async (em: EntityManager, garbage: (string | null)[]) => {
      const r = await sql(em, 'DELETE FROM uploads WHERE ref = ? RETURNING ref', [row.ref]);
      if (r.length === 0)
        throw new GatewayError('not-found/file-upload-not-found', 'This upload has already ended');
      // The kept blob was spared by garbage collection while this upload referred to it; the
      // parts' blobs go too (their rows with the upload's), but for one adopted as the file.
      await markGarbage(em, [row.restart_blob_id, ...garbage]);
    };
    try {
      if (row.store_upload_id === COMPLETED) {
        // Completed by an earlier end whose commit failed: the object is there, adopt it again.
        const size = await this.store.size(row.blob_id);
        if (size === null)
          throw new GatewayError(
            'processing-failure/file-not-uploaded',
            'The upload was lost; start it again',
          );
        await handle.adopt(row.blob_id, { size, md5: null, crc32: null });
        return await handle.commit({ within: (em) => ended(em, []) });
      }
      if (row.store_upload_id && isMultipartStore(this.store)) {
        const uploadId = row.store_upload_id;
        const receiving = await this.ctx.db.read((em) =>
          em.existsBy(UploadPartEntity, { ref: row.ref, size: RECEIVING }),
        );
        if (receiving)
          throw new GatewayError(
            'processing-failure/file-not-uploaded',
            'Part 1 was not received completely; send it again, then end the upload',
          );
        const parts = await this.store.listParts(row.blob_id, uploadId);
        this.checkParts(
          row,
          parts.filter((p) => p.partNumber > row.reserved_parts),
        );
        if (this.carries(row) && parts.length === 0) {
          // A restart with nothing after it: the kept bytes alone are the file.
          const kept = await this.blobs.open(row.restart_blob_id!, {
            range: { start: 0, end: row.restart - 1 },
          });
          parts.push(await this.store.putPart(row.blob_id, uploadId, 1, kept, { size: row.restart }));
        }
        if (parts.length === 0) {
          // S3 cannot complete a multipart upload without parts: nothing was sent, the file is empty.
          await handle.put(Readable.from([]));
          const entry = await handle.commit({ within: (em) => ended(em, []) });
          await this.store.abortUpload(row.blob_id, uploadId).catch(() => undefined);
          return entry;
        } else {
          const { size } = await this.store.complete(row.blob_id, row.store_upload_id, parts);
          // The completed object is the upload's blob (the upload row keeps it from the collector
          // until the commit): adopted, so a failed commit leaves it for a retried end.
          await this.ctx.db.work((em) =>
            em.update(UploadEntity, { ref: row.ref }, { store_upload_id: COMPLETED }),
          );
          // Object storage assembled the bytes without us reading them: no md5/crc32 (SPEC allows null).
          await handle.adopt(row.blob_id, { size, md5: null, crc32: null });
        }
        return await handle.commit({ within: (em) => ended(em, []) });
      }
      const parts = await this.ctx.db.read(async (em) =>
        (
          await sql<Record<string, unknown>>(
            em,
            `SELECT ${PART_COLUMNS} FROM upload_parts WHERE ref = ? ORDER BY part_number`,
            [row.ref],
          )
        ).map((r) => rowOf(UploadPartEntity, r)),
      );
      const unfinished = parts.find((p) => p.size === RECEIVING);
      if (unfinished)
        throw new GatewayError(
          'processing-failure/file-not-uploaded',
          `Part ${unfinished.part_number - row.reserved_parts} was not received completely; send it again, then end the upload`,
        );
      this.checkParts(
        row,
        parts.map((p) => ({ partNumber: p.part_number, size: p.size, etag: p.md5 })),
      );
      const only = parts.length === 1 && row.restart === 0 ? parts[0]! : null;
      if (only) {
        // One part is already the whole file, hashed as it arrived: it becomes the file's blob
        // without a second copy. The part row owns it until the commit, so a failed commit keeps it.
        await handle.adopt(only.blob_id, { size: only.size, md5: only.md5, crc32: only.crc32 });
      } else {
        const sources: (() => Promise<Readable>)[] = [];
        if (row.restart > 0)
          sources.push(() =>
            this.blobs.open(row.restart_blob_id!, { range: { start: 0, end: row.restart - 1 } }),
          );
        for (const part of parts) sources.push(() => this.blobs.open(part.blob_id));
        await handle.join(sources);
      }
      return await handle.commit({
        within: (em) =>
          ended(
            em,
            parts.filter((p) => p !== only).map((p) => p.blob_id),
          ),
      });
    } catch (err) {
      await handle.abort();
      // A store with no room to assemble the file (S3's CompleteMultipartUpload): one line, as for
      // any upload; the upload stays, so the same end succeeds once there is room.
      throw handle.noteFull(err);
    }
  }

  private checkParts(row: UploadRow, parts: UploadedPart[]): void {
    parts.forEach((p, i) => {
      if (p.partNumber !== row.reserved_parts + i + 1) {
        throw new GatewayError(
          'bad-request/invalid-upload-part-gap',
          `Part ${i + 1} is missing: parts must be numbered 1, 2, 3, … without gaps`,
        );
      }
      if (i < parts.length - 1 && p.size < MIN_PART) {
        throw new GatewayError(
          'bad-request/invalid-upload-part-size',
          `Part ${i + 1} has ${p.size} bytes; every part but the last needs at least ${MIN_PART}`,
        );
      }
    });
    // A carried first part holds the kept bytes already.
    const total = (this.carries(row) ? 0 : row.restart) + parts.reduce((s, p) => s + p.size, 0);
    if (total > MAX_FILE)
      throw new GatewayError(
        'bad-request/invalid-upload-part-size',
        `Files may be at most ${MAX_FILE} bytes`,
      );
  }

  /** expire drops uploads past their lifetime: their parts become garbage, object-store uploads are aborted. */
  async expire(): Promise<number> {
    const expired = await this.ctx.db.read((em) =>
      em.find(UploadEntity, { where: { expires_at: LessThan(new Date()) }, take: 100 }),
    );
    for (const row of expired) {
      if (row.store_upload_id && row.store_upload_id !== COMPLETED && isMultipartStore(this.store))
        await this.store.abortUpload(row.blob_id, row.store_upload_id).catch(() => undefined);
      await this.ctx.db.work(async (em) => {
        const parts = await em.findBy(UploadPartEntity, { ref: row.ref });
        await em.delete(UploadEntity, { ref: In([row.ref]) });
        // row.blob_id too: on S3 a completion whose commit failed made it a blob.
        await markGarbage(em, [row.blob_id, row.restart_blob_id, ...parts.map((p) => p.blob_id)]);
      });
    }
    return expired.length;
  }
}
