/**
 * BlobStore: bytes only, by immutable id (DESIGN.md "Namespace in the database, bytes in a blob
 * store"). A store knows nothing of paths, users or permissions; the namespace rows and
 * transfers.ts decide what a blob means. Implementations: blobstores/local.ts, blobstores/s3.ts.
 * Every implementation passes test/unit/blobstores/contract.ts.
 */
import type { Readable } from 'node:stream';

// The bytes of a small read a store made whole before it answered (readBytes).
const readWhole = new WeakMap<Readable, Buffer>();

/**
 * withBytes marks `stream` as carrying exactly `bytes`, read whole already: a front end that can
 * send a buffer sends them at once (WebDAV's GET of a small file answers without a stream pipeline
 * of its own, issue 13); every other reader reads the stream as usual.
 */
export function withBytes(stream: Readable, bytes: Buffer): Readable {
  readWhole.set(stream, bytes);
  return stream;
}

/** readBytes is what withBytes marked `stream` as carrying, or null. */
export function readBytes(stream: Readable): Buffer | null {
  return readWhole.get(stream) ?? null;
}

/** BlobId is an immutable blob name: lowercase hex and dashes, at most 64 characters. */
export type BlobId = string;

/** ByteRange is an inclusive range of bytes (HTTP Range semantics). */
export interface ByteRange {
  start: number;
  /** inclusive; absent means to the end */
  end?: number;
}

/** BlobStore stores and serves immutable blobs, streamed, never whole in memory. */
export interface BlobStore {
  readonly kind: 'local' | 's3';

  /**
   * put streams `body` into the new blob `id` and resolves with its size once the blob is durable.
   * It never overwrites: `id` is always new. On error or abort (`signal`) no blob is left behind,
   * and the returned promise rejects. Backpressure: it reads `body` no faster than it can store it.
   */
  put(id: BlobId, body: Readable, opts?: { signal?: AbortSignal }): Promise<{ size: number }>;

  /**
   * get opens blob `id`, or only `range` of it, as a stream. Rejects with a NotFoundBlob error
   * (code 'ENOENT') when the blob does not exist. The range is read from storage, never by
   * reading and discarding the bytes before it.
   */
  get(id: BlobId, opts?: { range?: ByteRange; signal?: AbortSignal }): Promise<Readable>;

  /**
   * heldOnOpen (optional) says that `get` has opened the blob by the time it resolves and that its
   * stream reads every byte even when the blob is deleted meanwhile (a local file's open
   * descriptor: POSIX keeps an unlinked file until its last close). A read then needs no lease
   * row: opened once its file row was read, it holds the bytes by itself (blobs.ts "Leases").
   */
  readonly heldOnOpen?: boolean;

  /** size returns the byte length of blob `id`, or null when it does not exist. */
  size(id: BlobId): Promise<number | null>;

  /**
   * adopt (optional) makes the finished local file `file` blob `id` without copying it when the
   * store can (the local store renames it into place); the file is gone afterwards either way.
   */
  adopt?(id: BlobId, file: string): Promise<{ size: number }>;

  /**
   * join (optional) writes blob `id` from `sources` opened in turn, in order, handing every piece
   * to `observe` before it is stored (and waiting on the promise it may return); `observe` must
   * not keep a piece. Resolves once the blob is durable, as put; a failure leaves no blob.
   */
  join?(
    id: BlobId,
    sources: (() => Promise<Readable>)[],
    observe: (chunk: Buffer) => Promise<void> | undefined,
    opts?: { signal?: AbortSignal },
  ): Promise<{ size: number }>;

  /**
   * adoptSyncs (optional) says that adopt makes the file durable (the local store at `fsync`), so
   * the writer of a file it will adopt starts its disk writes as the bytes arrive (writebehind.ts).
   */
  readonly adoptSyncs?: boolean;

  /**
   * freeBytes (optional) is how many more bytes the store can take, when it knows (the local
   * store: the free space of its file system); a store without a limit it can tell has none.
   */
  freeBytes?(): Promise<number | null>;

  /** space (optional) is the free and total bytes of the file system the store writes to. */
  space?(): Promise<{ free: number; total: number } | null>;

  /**
   * sweep (optional) deletes what puts that a crash interrupted left behind (a local store's
   * `<id>.<owner>.partial` files) as `abandoned` judges them by writer and age; resolves with how many.
   */
  sweep?(abandoned: (owner: string | null, mtimeMs: number) => Promise<boolean>): Promise<number>;

  /**
   * probe (optional) rejects when the store cannot work, for readiness checks, where `size` of a
   * missing blob cannot tell (the local store answers null for any failure): the local store's
   * folder (or the nearest one that exists) must be a writable folder.
   */
  probe?(): Promise<void>;

  /** delete removes blob `id`; deleting a missing blob is not an error. */
  delete(id: BlobId): Promise<void>;

  /** close releases clients and handles. */
  close(): Promise<void>;
}

/** BlobNotFound is the error `get` rejects with for a missing blob. */
export class BlobNotFound extends Error {
  readonly code = 'ENOENT';
  constructor(id: BlobId) {
    super(`blob ${id} does not exist`);
    this.name = 'BlobNotFound';
  }
}

/** isBlobId tells whether a string is a well-formed blob id (ids become file names and object keys). */
export function isBlobId(id: string): boolean {
  return /^[0-9a-f][0-9a-f-]{0,63}$/.test(id);
}

/** UploadedPart is one part of a multipart upload as the store has it. */
export interface UploadedPart {
  partNumber: number;
  size: number;
  etag: string;
}

/**
 * MultipartBlobStore is the optional capability behind SPEC's multi-step REST uploads when the
 * client sends parts straight to object storage (S3 presigned UploadPart URLs). Detect it with
 * `isMultipartStore(store)`; the local store does not have it (the gateway itself receives the
 * parts there, as ordinary blobs).
 */
export interface MultipartBlobStore extends BlobStore {
  /** createUpload starts a multipart upload that will become blob `id`; resolves with its upload id. */
  createUpload(id: BlobId): Promise<string>;
  /** partUrl presigns a PUT of part `partNumber` (1..10000), valid `expiresSeconds`. */
  partUrl(id: BlobId, uploadId: string, partNumber: number, expiresSeconds: number): Promise<string>;
  /** listParts lists the parts received so far, by part number. */
  listParts(id: BlobId, uploadId: string): Promise<UploadedPart[]>;
  /** copyPart makes part `partNumber` from an inclusive byte range of an existing blob (a restart keeps old bytes). */
  copyPart(
    id: BlobId,
    uploadId: string,
    partNumber: number,
    source: BlobId,
    range: Required<ByteRange>,
  ): Promise<void>;
  /**
   * putPart uploads part `partNumber` from a stream of exactly `size` bytes (the gateway sends a
   * part itself: a small restart's kept bytes in front of the client's first part).
   */
  putPart(
    id: BlobId,
    uploadId: string,
    partNumber: number,
    body: Readable,
    opts: { size: number; signal?: AbortSignal },
  ): Promise<UploadedPart>;
  /** complete joins the parts, in part-number order, into blob `id` and resolves with its size. */
  complete(id: BlobId, uploadId: string, parts: UploadedPart[]): Promise<{ size: number }>;
  /** abortUpload drops an unfinished upload and its parts. */
  abortUpload(id: BlobId, uploadId: string): Promise<void>;
}

/** isMultipartStore tells whether a store takes parts directly from clients. */
export function isMultipartStore(store: BlobStore): store is MultipartBlobStore {
  return 'createUpload' in store;
}
