/**
 * S3BlobStore keeps blobs as objects `blobs/<id>` in one bucket of AWS S3 or an S3-compatible
 * server (MinIO, Ceph, Garage, …). It is loaded only when SVC_STORAGE=s3 (STYLE.md §4), through
 * blobstores/index.ts, so a local install never loads the AWS SDK.
 *
 * Writes stream through @aws-sdk/lib-storage's Upload: a multipart upload of 8 MiB parts, at most
 * 4 in flight, so memory is bounded whatever the blob's size (measured: up to about 75 MiB of
 * buffers alive for one put, as lib-storage keeps finished parts referenced until their uploader
 * takes the next one). The bytes become an object only when CompleteMultipartUpload (or the single
 * PutObject of a small blob) succeeds, so a reader never sees half a blob; a failed or aborted put
 * aborts its multipart upload.
 */
import { addAbortSignal, pipeline, Readable, Transform } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListPartsCommand,
  S3Client,
  UploadPartCommand,
  UploadPartCopyCommand,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { classifyStorageError } from '../../errors.ts';
import {
  BlobNotFound,
  isBlobId,
  type BlobId,
  type ByteRange,
  type MultipartBlobStore,
  type UploadedPart,
} from '../blobstore.ts';

/** PART_SIZE is the size of each part `put` sends; S3 wants at least 5 MiB but the last. */
export const PART_SIZE = 8 * 1024 * 1024;
/** QUEUE_SIZE is how many parts of one `put` are in flight at once. */
export const QUEUE_SIZE = 4;
/** MAX_PRESIGN_SECONDS is SigV4's longest validity of a presigned URL (7 days). */
const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;

/** S3BlobStoreOptions are the storage.s3.* settings, plus credentials for tests. */
export interface S3BlobStoreOptions {
  bucket: string;
  region: string;
  /** endpoint of an S3-compatible server; absent or empty for AWS itself */
  endpoint?: string;
  /**
   * where clients reach the store, when not at `endpoint` (the gateway's own way there): presigned
   * part URLs name it and are signed for its host. Absent or empty: `endpoint`.
   */
  publicEndpoint?: string;
  /** path-style URLs (http://host/bucket/key), which MinIO and most S3-compatible servers need */
  forcePathStyle?: boolean;
  /** absent: the SDK's default chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, …) */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
}

/** S3BlobStore stores blobs as objects in one S3 bucket and takes upload parts straight from clients. */
export class S3BlobStore implements MultipartBlobStore {
  readonly kind = 's3' as const;

  /** client is the SDK client; exposed so tests and instrumentation can add middleware. */
  readonly client: S3Client;
  /** presigner signs the URLs clients use: `client`, or one for the public endpoint (SigV4 signs the host) */
  private readonly presigner: S3Client;
  private readonly bucket: string;

  constructor(options: S3BlobStoreOptions) {
    this.bucket = options.bucket;
    const config: S3ClientConfig = {
      region: options.region,
      forcePathStyle: options.forcePathStyle ?? false,
      // Since 3.729 the SDK adds CRC32 checksums to every upload by default. S3-compatible servers
      // that predate them reject or mis-store such requests, and a presigned UploadPart URL would
      // carry the checksum of an empty body (x-amz-checksum-crc32=AAAAAA==), so AWS itself would
      // refuse every part a client sends to it. Checksums only where an operation requires them.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    };
    if (options.endpoint) config.endpoint = options.endpoint;
    if (options.credentials) config.credentials = options.credentials;
    this.client = new S3Client(config);
    const publicEndpoint = options.publicEndpoint || undefined;
    // Presigning only computes a signature: this client never opens a connection.
    this.presigner =
      publicEndpoint && publicEndpoint !== options.endpoint
        ? new S3Client({ ...config, endpoint: publicEndpoint })
        : this.client;
  }

  /**
   * write sends a command that stores bytes (a part, a part copied, the completion that assembles
   * them), turning an answer that the store is full (507, MinIO's XMinioStorageFull) into the core's
   * insufficient-storage, as `put` does.
   */
  private async write<T>(sending: Promise<T>): Promise<T> {
    try {
      return await sending;
    } catch (err) {
      throw classifyStorageError(err);
    }
  }

  private key(id: BlobId): string {
    if (!isBlobId(id)) throw new Error(`invalid blob id ${id}`);
    return `blobs/${id}`;
  }

  async put(id: BlobId, body: Readable, opts: { signal?: AbortSignal } = {}): Promise<{ size: number }> {
    const { signal } = opts;
    const Key = this.key(id);
    if (signal?.aborted) {
      body.destroy();
      throw abortError(signal);
    }
    let size = 0;
    const counted = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        size += chunk.length;
        done(null, chunk);
      },
    });
    // An error of `body`, or the abort signal, destroys `counted`; the Upload then fails while
    // reading it and aborts its multipart upload before done() rejects. (Upload's own abort()
    // would reject at once and leave that cleanup running in the background.)
    const reading = new Promise<void>((resolve, reject) =>
      pipeline(body, counted, (err) => (err ? reject(err) : resolve())),
    );
    if (signal) addAbortSignal(signal, counted);
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key, Body: counted, ContentType: 'application/octet-stream' },
      partSize: PART_SIZE,
      queueSize: QUEUE_SIZE,
    });
    // When S3 fails first, the Upload stops reading: end the pipeline too, or it would wait forever.
    const storing = upload.done().catch((err: unknown) => {
      counted.destroy(err instanceof Error ? err : new Error(String(err)));
      throw err;
    });
    const [read, stored] = await Promise.allSettled([reading, storing]);
    // The reading error is the cause (the client's stream broke, or the abort); report that one.
    let failure: unknown =
      read.status === 'rejected' ? read.reason : stored.status === 'rejected' ? stored.reason : null;
    // Aborted after the last byte was read: the object may exist already; it must not stay.
    if (!failure && signal?.aborted) failure = abortError(signal);
    if (failure) {
      counted.destroy();
      // The id is new (BlobStore.put never overwrites), so whatever is under it is ours to remove.
      await this.delete(id).catch(() => {});
      // An S3-compatible store out of space (507, MinIO's XMinioStorageFull) is insufficient-storage.
      throw classifyStorageError(failure);
    }
    return { size };
  }

  async get(id: BlobId, opts: { range?: ByteRange; signal?: AbortSignal } = {}): Promise<Readable> {
    const { range, signal } = opts;
    const Range = range ? rangeHeader(range) : undefined;
    let output;
    try {
      output = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: this.key(id), Range }),
        signal ? { abortSignal: signal } : {},
      );
    } catch (err) {
      if (isNotFound(err)) throw new BlobNotFound(id);
      // A range that starts at or past the end: an empty read, as from a local file.
      if (errorName(err) === 'InvalidRange' || httpStatus(err) === 416) return Readable.from([]);
      throw err;
    }
    const stream = output.Body;
    if (!(stream instanceof Readable)) throw new Error(`S3 GetObject of ${id} returned no Node.js stream`);
    if (signal) addAbortSignal(signal, stream);
    return stream;
  }

  async size(id: BlobId): Promise<number | null> {
    try {
      const head = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.key(id) }));
      return head.ContentLength ?? 0;
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  async delete(id: BlobId): Promise<void> {
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.key(id) }));
    } catch (err) {
      // S3 answers 204 for a missing key; some compatible servers answer 404.
      if (!isNotFound(err)) throw err;
    }
  }

  async close(): Promise<void> {
    this.client.destroy();
    if (this.presigner !== this.client) this.presigner.destroy();
  }

  async createUpload(id: BlobId): Promise<string> {
    const out = await this.write(
      this.client.send(
        new CreateMultipartUploadCommand({
          Bucket: this.bucket,
          Key: this.key(id),
          ContentType: 'application/octet-stream',
        }),
      ),
    );
    if (!out.UploadId) throw new Error(`S3 CreateMultipartUpload of ${id} returned no UploadId`);
    return out.UploadId;
  }

  async partUrl(id: BlobId, uploadId: string, partNumber: number, expiresSeconds: number): Promise<string> {
    checkPartNumber(partNumber);
    if (!Number.isInteger(expiresSeconds) || expiresSeconds < 1 || expiresSeconds > MAX_PRESIGN_SECONDS) {
      throw new RangeError(`expiresSeconds must be 1..${MAX_PRESIGN_SECONDS}, not ${expiresSeconds}`);
    }
    return getSignedUrl(
      this.presigner,
      new UploadPartCommand({
        Bucket: this.bucket,
        Key: this.key(id),
        UploadId: uploadId,
        PartNumber: partNumber,
      }),
      { expiresIn: expiresSeconds },
    );
  }

  async listParts(id: BlobId, uploadId: string): Promise<UploadedPart[]> {
    const parts: UploadedPart[] = [];
    let marker: string | undefined;
    for (;;) {
      const out = await this.client.send(
        new ListPartsCommand({
          Bucket: this.bucket,
          Key: this.key(id),
          UploadId: uploadId,
          PartNumberMarker: marker,
        }),
      );
      for (const p of out.Parts ?? []) {
        if (p.PartNumber === undefined || p.ETag === undefined) continue;
        parts.push({ partNumber: p.PartNumber, size: p.Size ?? 0, etag: p.ETag });
      }
      if (!out.IsTruncated || !out.NextPartNumberMarker) break;
      marker = out.NextPartNumberMarker;
    }
    return parts.sort((a, b) => a.partNumber - b.partNumber);
  }

  async copyPart(
    id: BlobId,
    uploadId: string,
    partNumber: number,
    source: BlobId,
    range: Required<ByteRange>,
  ): Promise<void> {
    checkPartNumber(partNumber);
    try {
      await this.write(
        this.client.send(
          new UploadPartCopyCommand({
            Bucket: this.bucket,
            Key: this.key(id),
            UploadId: uploadId,
            PartNumber: partNumber,
            CopySource: `${encodeURIComponent(this.bucket)}/${this.key(source)}`,
            CopySourceRange: rangeHeader(range),
          }),
        ),
      );
    } catch (err) {
      if (errorName(err) === 'NoSuchKey') throw new BlobNotFound(source);
      throw err;
    }
  }

  async putPart(
    id: BlobId,
    uploadId: string,
    partNumber: number,
    body: Readable,
    opts: { size: number; signal?: AbortSignal },
  ): Promise<UploadedPart> {
    checkPartNumber(partNumber);
    const out = await this.write(
      this.client.send(
        new UploadPartCommand({
          Bucket: this.bucket,
          Key: this.key(id),
          UploadId: uploadId,
          PartNumber: partNumber,
          Body: body,
          ContentLength: opts.size,
        }),
        opts.signal ? { abortSignal: opts.signal } : {},
      ),
    );
    if (!out.ETag) throw new Error(`S3 UploadPart ${partNumber} of ${id} returned no ETag`);
    return { partNumber, size: opts.size, etag: out.ETag };
  }

  async complete(id: BlobId, uploadId: string, parts: UploadedPart[]): Promise<{ size: number }> {
    const ordered = [...parts].sort((a, b) => a.partNumber - b.partNumber);
    await this.write(
      this.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: this.bucket,
          Key: this.key(id),
          UploadId: uploadId,
          MultipartUpload: { Parts: ordered.map((p) => ({ PartNumber: p.partNumber, ETag: p.etag })) },
        }),
      ),
    );
    const size = await this.size(id);
    if (size === null) throw new Error(`blob ${id} is missing after CompleteMultipartUpload`);
    return { size };
  }

  async abortUpload(id: BlobId, uploadId: string): Promise<void> {
    try {
      await this.client.send(
        new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: this.key(id), UploadId: uploadId }),
      );
    } catch (err) {
      // Already completed, aborted or expired: nothing is left to drop.
      if (errorName(err) !== 'NoSuchUpload' && httpStatus(err) !== 404) throw err;
    }
  }
}

/**
 * rangeHeader is the HTTP Range for an inclusive byte range. It checks the range first, because S3
 * ignores a malformed Range and sends the whole object (RFC 9110 §14.2).
 */
function rangeHeader(range: ByteRange): string | undefined {
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || start < 0) throw new RangeError(`invalid range start ${start}`);
  if (end !== undefined && (!Number.isSafeInteger(end) || end < start)) {
    throw new RangeError(`invalid range end ${end} for start ${start}`);
  }
  // The whole object: no header, so an empty object reads as empty rather than failing with 416.
  if (start === 0 && end === undefined) return undefined;
  return `bytes=${start}-${end ?? ''}`;
}

function checkPartNumber(partNumber: number): void {
  if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > 10000) {
    throw new RangeError(`part number must be 1..10000, not ${partNumber}`);
  }
}

function errorName(err: unknown): string | undefined {
  return err instanceof Error ? err.name : undefined;
}

function httpStatus(err: unknown): number | undefined {
  return (err as { $metadata?: { httpStatusCode?: number } } | null)?.$metadata?.httpStatusCode;
}

/** isNotFound tells a missing object (GetObject's NoSuchKey, HeadObject's bodiless 404) from other errors. */
function isNotFound(err: unknown): boolean {
  const name = errorName(err);
  if (name === 'NoSuchKey' || name === 'NotFound') return true;
  // A missing bucket is a configuration error, never a missing blob.
  return httpStatus(err) === 404 && name !== 'NoSuchBucket' && name !== 'NoSuchUpload';
}

/** abortError is the rejection of an aborted put, shaped like Node's own (name AbortError, cause the reason). */
function abortError(signal: AbortSignal): Error {
  return Object.assign(new Error('The operation was aborted', { cause: signal.reason }), {
    name: 'AbortError',
    code: 'ABORT_ERR',
  });
}
