/**
 * The one write pipeline (issue 11, STYLE.md §10): every upload on every front end — FTP STOR and
 * APPE, SFTP's staged writes, WebDAV PUT, the REST multi-step upload's end — is a WriteHandle:
 *
 *   open    rights, WebDAV locks, the parent folder and "not a folder", checked once, before a byte
 *   put     stream the bytes into a new blob the handle owns (md5 and crc32 on the way), or
 *   adopt   take a finished blob another record owns (an upload part, a completed S3 upload)
 *   commit  one tree change (tree.ts) that checks again, points the row at the blob, marks the old
 *           blob garbage and records the Action
 *   abort   give up: the owned blob becomes garbage, the file keeps its old content
 *   suspend a cut upload: the bytes that arrived become the user's pending version of the path
 *           (pending.ts), which a later write of that user resumes; the file keeps its old content
 *
 * This is the only code that inserts or updates a file row's content, and a handle gives up only a
 * blob it owns: an adopted blob stays with its owner whatever happens, so a failed commit can be
 * retried (issue 11: a retried `end` must never name a deleted blob).
 */
import { finished, PassThrough, Readable } from 'node:stream';
import type { EntityManager } from 'typeorm';
import type { FileRow } from '../../db/entities.ts';
import { sql } from '../../db/sql.ts';
import { requireCapability, requireIn, rightsOn, type Capability } from '../access/rights.ts';
import { recordAction } from '../actions/record.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError, isStorageFull } from '../errors.ts';
import { baseName, parentOf } from '../paths.ts';
import { isMultipartStore, type BlobStore, type MultipartBlobStore, type UploadedPart } from './blobstore.ts';
import { markGarbage, type Blobs, type NewBlob } from './blobs.ts';
import { requireUnlocked } from './locks.ts';
import { getRow, getRows, mustBeFolder, toEntry, type Entry } from './namespace.ts';
import {
  dropPending,
  ownerOf,
  pendingAt,
  pendingEntry,
  recordPending,
  type PendingVersionRow,
} from './pending.ts';
import type { SessionScope } from './scope.ts';
import { changeTree } from './tree.ts';
import { Checksum, Hasher, type Digest } from './checksum.ts';
import { concat } from './transfers.ts';
import { MAX_PART, MIN_PART } from './uploads.ts';

/** RESUME_PART is the size of the parts a resumed upload's new bytes go to object storage in. */
const RESUME_PART = 8 * 1024 * 1024;

/** WriteScope is what a handle needs of the session that opened it. */
export interface WriteScope extends SessionScope {
  readonly ctx: CoreContext;
  readonly store: BlobStore;
  readonly blobs: Blobs;
}

/** BlobFacts describe a finished blob's content. */
export interface BlobFacts {
  size: number;
  md5: string | null;
  crc32: string | null;
}

/** SendOptions shape a whole-stream upload (FTP, WebDAV). */
export interface SendOptions {
  /** the client's modification time for the file, if it sent one */
  mtime?: Date;
  /** aborting discards the upload and keeps the old content */
  signal?: AbortSignal;
}

/** WriteHandle is one upload of one file, from its checks to its commit or abort. */
export class WriteHandle {
  private owned: NewBlob | null = null;
  private content: (BlobFacts & { blobId: string }) | null = null;
  private done = false;
  private fullNoted = false;

  private constructor(
    private readonly scope: WriteScope,
    private target: string,
    /** the row at the path when the handle was opened (null for a new file) */
    readonly existing: FileRow | null,
    /** bytes of the current content kept before the body (FTP REST+STOR, APPE) */
    private readonly keep: number,
    /** the opener's pending version of the path when the handle was opened (pending.ts) */
    readonly pending: PendingVersionRow | null,
    /** the blob the kept bytes come from: the pending version's when resuming it, else the file's */
    private readonly base: string | null,
  ) {
    this.opened = target;
  }

  /** the site path the handle was opened for (its pending version is there) */
  private readonly opened: string;

  /**
   * open checks that `path` may be written: the write right, no WebDAV lock without its token, the
   * parent is a folder, the path is not a folder. `offset` keeps that many bytes of the current
   * content before the body, `append` all of it. The current content is, to a user who has a
   * pending version of the path, that pending version: a write at an offset resumes it.
   */
  static async open(
    scope: WriteScope,
    path: string,
    opts: { offset?: number; append?: boolean; resume?: boolean } = {},
  ): Promise<WriteHandle> {
    const site = scope.site(path);
    const { existing, pending, mayList } = await scope.ctx.db.read(async (em) => {
      const caps = await rightsOn(em, scope.principal, site);
      return {
        existing: await WriteHandle.check(scope, em, site, caps),
        pending: await pendingAt(em, ownerOf(scope.principal), site),
        mayList: caps.has('list'),
      };
    });
    const size = pending?.size ?? existing?.size ?? 0;
    const keep = opts.append ? size : (opts.offset ?? 0);
    // `resume` (WebDAV Content-Range) continues the user's pending version exactly where it ends.
    if (opts.resume && (!pending || keep !== pending.size))
      throw new GatewayError(
        'processing-failure/invalid-range',
        pending
          ? `The cut upload of /${scope.visible(site)} continues at byte ${pending.size}, not ${keep}`
          : `/${scope.visible(site)} has no cut upload to continue`,
      );
    if (!Number.isInteger(keep) || keep < 0 || keep > size)
      throw new GatewayError(
        'bad-request/invalid-upload-offset',
        `The offset ${keep} is beyond the file's ${size} bytes`,
      );
    const base = keep > 0 ? (pending ? pending.blob_id : existing!.blob_id) : null;
    const handle = new WriteHandle(scope, site, existing, keep, pending, base);
    // What stat would have answered, read in the same look (a WebDAV PUT's preconditions and its
    // 201 or 204 need it): a user who may not list the path does not learn whether it exists.
    const visible = scope.visible(site);
    if (mayList)
      handle.seen = pending ? pendingEntry(pending, visible) : existing && toEntry(existing, visible);
    return handle;
  }

  /**
   * before is the path as the opener saw it when the handle was opened, as stat shows it (their
   * pending version, if they have one): null when nothing is there, or when they may not list it.
   */
  get before(): Entry | null {
    return this.seen;
  }
  private seen: Entry | null = null;

  /**
   * check runs open's checks of `site` in a unit of work and returns the row there; `caps`, when
   * given, are the principal's rights on it, read already.
   */
  private static async check(
    scope: WriteScope,
    em: EntityManager,
    site: string,
    caps?: ReadonlySet<Capability>,
  ): Promise<FileRow | null> {
    const show = (s: string) => scope.visible(s);
    if (site === scope.root)
      throw new GatewayError('bad-request/invalid-path', 'The root folder is not a file');
    if (caps) requireIn(caps, 'write', site, show);
    else await requireCapability(em, scope.principal, 'write', site, show);
    await requireUnlocked(em, scope.principal, scope.lockTokens, site, { show });
    const parent = parentOf(site);
    const rows = await getRows(em, [parent, site]);
    mustBeFolder(
      rows.get(parent) ?? null,
      parent,
      'processing-failure/destination-parent-does-not-exist',
      show,
    );
    const row = rows.get(site) ?? null;
    if (row?.type === 'directory')
      throw new GatewayError('processing-failure/destination-exists', `/${show(site)} is a folder`);
    return row;
  }

  /** site is the site path the commit will write. */
  get site(): string {
    return this.target;
  }

  /** isOpen tells whether the handle may still be committed. */
  get isOpen(): boolean {
    return !this.done;
  }

  /**
   * retarget makes the commit write `path` instead (an open SFTP file renamed, as on a disk), after
   * open's checks for it.
   */
  async retarget(path: string): Promise<void> {
    this.live();
    const site = this.scope.site(path);
    await this.scope.ctx.db.read((em) => WriteHandle.check(this.scope, em, site));
    this.target = site;
  }

  /**
   * put streams `source` into a new blob the handle owns, hashing it. On failure or abort the blob
   * is given up, `source` destroyed and the error thrown (an abort is `file-not-uploaded`); the
   * handle stays open. With `drain`, a full storage leaves `source` readable, detached, for the
   * caller to drain (a client cut off mid-body sees a reset, not the refusal).
   */
  async put(source: Readable, opts: { signal?: AbortSignal; drain?: boolean } = {}): Promise<void> {
    this.live();
    const hasher = new Hasher();
    // Listened to before the first await: a body that fails meanwhile must not be unhandled. Its
    // error passes to the hasher, whose failure reaches this caller through the store's put; until
    // the store has the hasher (after the blob's record is made), an 'error' on it with no listener
    // would stop the process: a browser closed mid-upload did.
    hasher.on('error', () => undefined);
    source.once('error', (err) => hasher.destroy(err));
    const blob = await this.scope.blobs.create().catch((err: unknown) => {
      source.destroy();
      throw this.noteFull(err);
    });
    let digest: Digest;
    try {
      // A body that failed or was cut while the record was made: the store would wait for it forever.
      if (source.destroyed || hasher.destroyed)
        throw source.errored ?? hasher.errored ?? new Error('The body ended before it was read');
      await this.scope.store.put(
        blob.blobId,
        source.pipe(hasher),
        opts.signal ? { signal: opts.signal } : {},
      );
      digest = await hasher.digest();
    } catch (err) {
      if (opts.drain && isStorageFull(err)) source.unpipe(hasher);
      else source.destroy();
      await this.scope.blobs.discard(blob.blobId, blob);
      if (opts.signal?.aborted)
        throw new GatewayError(
          'processing-failure/file-not-uploaded',
          'The upload was aborted; the file is unchanged',
        );
      throw this.noteFull(err);
    }
    await this.release();
    this.owned = blob;
    this.content = { blobId: blob.blobId, size: hasher.bytes, ...digest };
  }

  /**
   * join makes the handle's new blob from `sources` in order (REST `action=end`: the kept bytes,
   * then the parts), hashing them. A store that can join (the local one) reads and writes them
   * through reused buffers; any other gets them as one stream through put.
   */
  async join(sources: (() => Promise<Readable>)[]): Promise<void> {
    const store = this.scope.store;
    if (!store.join) return this.put(concat(sources));
    this.live();
    const blob = await this.scope.blobs.create().catch((err: unknown) => {
      throw this.noteFull(err);
    });
    const sum = new Checksum();
    let digest: Digest;
    let size: number;
    try {
      ({ size } = await store.join(blob.blobId, sources, (chunk) => sum.update(chunk)));
      digest = await sum.digest();
    } catch (err) {
      sum.discard();
      await this.scope.blobs.discard(blob.blobId, blob);
      throw this.noteFull(err);
    }
    await this.release();
    this.owned = blob;
    this.content = { blobId: blob.blobId, size, ...digest };
  }

  /**
   * putAfterParts makes the handle's new blob on object storage from `keep` bytes of blob `base`,
   * copied as parts inside the store, then `tail` in parts of RESUME_PART. The md5 and crc32 are of
   * the whole: the kept bytes are read back for them (a read, not an upload), then the new ones.
   */
  private async putAfterParts(
    store: MultipartBlobStore,
    base: string,
    keep: number,
    tail: Readable,
  ): Promise<void> {
    this.live();
    const blob = await this.scope.blobs.create().catch((err: unknown) => {
      throw this.noteFull(err);
    });
    let uploadId: string | null = null;
    try {
      uploadId = await store.createUpload(blob.blobId);
      // Equal copy parts of at most 5 GiB each, so none is below the 5 MiB minimum.
      const copySize = Math.ceil(keep / Math.ceil(keep / MAX_PART));
      let partNumber = 0;
      for (let start = 0; start < keep; start += copySize)
        await store.copyPart(blob.blobId, uploadId, ++partNumber, base, {
          start,
          end: Math.min(keep, start + copySize) - 1,
        });
      const copies = partNumber;
      const hasher = new Hasher();
      for await (const chunk of await this.scope.blobs.open(base, { range: { start: 0, end: keep - 1 } }))
        await hasher.update(chunk as Buffer);
      const sent: UploadedPart[] = [];
      let buffered: Buffer[] = [];
      let pendingSize = 0;
      const flush = async () => {
        if (pendingSize === 0) return;
        const data = Buffer.concat(buffered, pendingSize);
        buffered = [];
        pendingSize = 0;
        sent.push(
          await store.putPart(blob.blobId, uploadId!, ++partNumber, Readable.from([data]), {
            size: data.length,
          }),
        );
      };
      for await (const chunk of tail as AsyncIterable<Buffer>) {
        await hasher.update(chunk);
        buffered.push(chunk);
        pendingSize += chunk.length;
        if (pendingSize >= RESUME_PART) await flush();
      }
      await flush();
      const copied = (await store.listParts(blob.blobId, uploadId)).filter((p) => p.partNumber <= copies);
      const { size } = await store.complete(blob.blobId, uploadId, [...copied, ...sent]);
      uploadId = null;
      await this.release();
      this.owned = blob;
      this.content = { blobId: blob.blobId, size, ...(await hasher.digest()) };
      if (size !== hasher.bytes)
        throw new Error(`resumed object has ${size} bytes, ${hasher.bytes} were hashed`);
    } catch (err) {
      if (uploadId) await store.abortUpload(blob.blobId, uploadId).catch(() => undefined);
      if (this.owned !== blob) await this.scope.blobs.discard(blob.blobId, blob);
      throw this.noteFull(err);
    }
  }

  /**
   * putOnPending makes the handle's new blob from the opener's pending version followed by `tail`,
   * when the store can join them without sending the pending bytes again (object storage, and a
   * pending version of at least S3's minimum part size); else it returns false and does nothing.
   * SFTP's staged resume (OpenSSH `reput`) on S3 commits this way.
   */
  async putOnPending(tail: () => Readable): Promise<boolean> {
    const store = this.scope.store;
    const pending = this.pending;
    if (!pending || pending.size < MIN_PART || !isMultipartStore(store)) return false;
    await this.putAfterParts(store, pending.blob_id, pending.size, tail());
    return true;
  }

  /** adoptSyncs tells whether putFile's store syncs the file it adopts (writebehind.ts). */
  get adoptSyncs(): boolean {
    return this.scope.store.adoptSyncs === true;
  }

  /** putFile makes the local file `file`, whose facts are known, the handle's new blob (store.adopt). */
  async putFile(file: string, facts: Omit<BlobFacts, 'size'>): Promise<boolean> {
    this.live();
    const adopt = this.scope.store.adopt?.bind(this.scope.store);
    if (!adopt) return false;
    const blob = await this.scope.blobs.create();
    let size: number;
    try {
      ({ size } = await adopt(blob.blobId, file));
    } catch (err) {
      await this.scope.blobs.discard(blob.blobId, blob);
      throw this.noteFull(err);
    }
    await this.release();
    this.owned = blob;
    this.content = { blobId: blob.blobId, size, ...facts };
    return true;
  }

  /** adopt takes a finished blob that another record owns and keeps (the handle never gives it up). */
  async adopt(blobId: string, facts: BlobFacts): Promise<void> {
    this.live();
    await this.release();
    this.content = { blobId, ...facts };
  }

  /**
   * send is put (after the kept bytes of the current content) and commit in one call: the whole
   * upload of a stream (FTP STOR/APPE, WebDAV PUT). On error nothing changes.
   */
  async send(body: Readable, opts: SendOptions = {}): Promise<Entry> {
    const keep = this.keep;
    const base = this.base;
    // A user's upload may be resumed: a cut (the body failed or closed early, or the signal
    // aborted) ends the stream where it stopped, and what arrived is kept as pending. A site-wide
    // key's upload (nobody to resume it) is discarded as before.
    const resumable = ownerOf(this.scope.principal) !== null;
    if (resumable && keep === 0) await this.discardPending();
    const cut = resumable ? untilCut(body, opts.signal) : null;
    // The body reaches the kept bytes' concatenation through a pipe, so a failure can destroy the
    // concatenation and still drain the client's stream.
    const tail = cut ? cut.stream : keep > 0 ? follow(body) : body;
    const store = this.scope.store;
    // Resuming on object storage: the kept bytes become parts of the new object inside the store
    // (UploadPartCopy), never sent again. Only S3's 5 MiB minimum part size keeps a smaller pending
    // version on the general path below, which sends its bytes once more, as uploads.ts does.
    const onParts =
      cut && this.pending && base === this.pending.blob_id && keep >= MIN_PART && isMultipartStore(store);
    const source =
      keep > 0 && !onParts
        ? concat([() => this.scope.blobs.open(base!, { range: { start: 0, end: keep - 1 } }), () => tail])
        : tail;
    try {
      if (onParts) await this.putAfterParts(store, base!, keep, tail);
      else
        await this.put(source, {
          drain: source === body,
          ...(opts.signal && !cut ? { signal: opts.signal } : {}),
        });
      // A signal that fired while the bytes were being stored cuts too: an FTP client killed mid-way
      // closes its data connection normally (FIN) and its control connection at the same moment.
      if (cut?.happened() || (cut && opts.signal?.aborted)) {
        await this.suspend();
        throw new GatewayError(
          'processing-failure/file-not-uploaded',
          'The upload was cut off; the file is unchanged, and what arrived is kept for resuming',
        );
      }
      return await this.commit(opts.mtime ? { mtime: opts.mtime } : {});
    } catch (err) {
      if (source !== body) {
        body.unpipe();
        source.destroy();
      }
      body.resume();
      await this.abort();
      throw err;
    }
  }

  /**
   * commit points the row at the handle's content in one tree change: the checks of open again
   * (the folder may have gone, moved or been locked while bytes streamed), then the row, the old
   * blob marked garbage, `within` (the caller's own rows, such as the upload it ends) and the
   * `create` or `update` Action. On failure the owned blob is given up and nothing changes.
   */
  async commit(opts: { mtime?: Date; within?: (em: EntityManager) => Promise<void> } = {}): Promise<Entry> {
    this.live();
    const content = this.content;
    if (!content) throw new Error('WriteHandle.commit before put or adopt');
    this.done = true;
    const site = this.target;
    const owned = this.owned;
    const { scope } = this;
    try {
      const changes = site === this.opened ? [site] : [site, this.opened];
      return await changeTree(scope.ctx, { changes }, async (em) => {
        if (owned) await scope.blobs.settle(em, owned);
        const row = await WriteHandle.check(scope, em, site);
        // The upload completed: the pending version it resumed (or replaced) is done with.
        for (const p of changes) await dropPending(em, ownerOf(scope.principal), p);
        const values = {
          size: content.size,
          md5: content.md5,
          crc32: content.crc32,
          blob_id: content.blobId,
          mtime: opts.mtime ?? new Date(),
        };
        const facts = [values.size, values.md5, values.crc32, values.blob_id, values.mtime.getTime()];
        if (row) {
          await sql(
            em,
            'UPDATE files SET size = ?, md5 = ?, crc32 = ?, blob_id = ?, mtime = ? WHERE id = ?',
            [...facts, row.id],
          );
          if (row.blob_id !== content.blobId) await markGarbage(em, [row.blob_id]);
        } else {
          await sql(
            em,
            'INSERT INTO files (path, parent, name, type, size, md5, crc32, blob_id, mtime) ' +
              "VALUES (?, ?, ?, 'file', ?, ?, ?, ?, ?)",
            [site, parentOf(site), baseName(site), ...facts],
          );
        }
        await opts.within?.(em);
        await recordAction(em, scope.principal, {
          action: row ? 'update' : 'create',
          path: site,
          size: values.size,
        });
        return toEntry({ path: site, name: baseName(site), type: 'file', ...values }, scope.visible(site));
      });
    } catch (err) {
      this.owned = null;
      if (owned) await scope.blobs.discard(owned.blobId, owned).catch(() => undefined);
      throw err;
    }
  }

  /**
   * noteFull logs, once per upload and for every front end alike, that the storage had no room for
   * it (the store classified it as insufficient-storage), and returns `err`. The front ends answer
   * it in their terms and do not log it again (issue 12: one line per failed transfer).
   */
  noteFull(err: unknown): unknown {
    if (!isStorageFull(err) || this.fullNoted) return err;
    this.fullNoted = true;
    const { principal } = this.scope;
    this.scope.ctx.log.warn('upload refused: the storage is full', {
      interface: principal.interface,
      user: principal.user?.username ?? null,
      ip: principal.ip,
      path: `/${this.target}`,
    });
    return err;
  }

  /**
   * suspend ends a cut upload: the handle's content (the bytes kept and those that arrived) becomes
   * the user's pending version of the path, replacing the one before; the file is unchanged.
   * Without a user, or with no byte, it is abort. Resolves whether something was kept.
   */
  suspend(): Promise<boolean> {
    return this.finishing(() => this.keepPending());
  }

  /**
   * finishing runs `end` (a cut upload's end) as work a stopping gateway waits for before it
   * closes the database (Blobs.finishing).
   */
  finishing<T>(end: () => Promise<T>): Promise<T> {
    return this.scope.blobs.finishing(end());
  }

  private async keepPending(): Promise<boolean> {
    const content = this.content;
    const owned = this.owned;
    this.done = true;
    if (!content || !owned || content.size === 0 || ownerOf(this.scope.principal) === null) {
      await this.release();
      return false;
    }
    const { scope } = this;
    let kept = false;
    try {
      kept = await changeTree(scope.ctx, { changes: [this.target] }, async (em) => {
        // A file written since this upload began (rclone sends a file again on a new handle and
        // leaves the failed one open until it disconnects) makes the cut stale: resuming it would
        // show its uploader older bytes than the file they completed.
        if (this.target === this.opened) {
          const now = await getRow(em, this.target);
          if ((now?.blob_id ?? null) !== (this.existing?.blob_id ?? null)) return false;
        }
        await scope.blobs.settle(em, owned);
        await recordPending(scope.ctx, em, scope.principal, this.target, owned.blobId, content.size);
        return true;
      });
    } catch (err) {
      scope.ctx.log.warn('keeping a cut upload failed', { path: `/${this.target}`, error: String(err) });
    }
    if (!kept) {
      await this.release();
      return false;
    }
    this.owned = null;
    this.content = null;
    return true;
  }

  /** discardPending drops the opener's pending version of the path: a new upload starts from offset 0. */
  async discardPending(): Promise<void> {
    if (!this.pending) return;
    const user = ownerOf(this.scope.principal);
    await changeTree(this.scope.ctx, { changes: [this.opened] }, (em) => dropPending(em, user, this.opened));
  }

  /** abort gives up the handle: its own blob, if any, becomes garbage. Safe to call twice. */
  async abort(): Promise<void> {
    this.done = true;
    await this.release();
  }

  /** release gives up the owned blob (before a new put, or on abort). */
  private async release(): Promise<void> {
    const owned = this.owned;
    this.owned = null;
    this.content = null;
    if (owned) await this.scope.blobs.discard(owned.blobId, owned);
  }

  private live(): void {
    if (this.done)
      throw new GatewayError('processing-failure/file-not-uploaded', 'This upload is already closed');
  }
}

/**
 * untilCut pipes `body` into a stream that ends, rather than fails, where `body` failed, closed
 * early or `signal` aborted, and tells afterwards whether that happened: the bytes that arrived
 * before a cut are whole and in order, and become a pending version (suspend).
 */
function untilCut(body: Readable, signal?: AbortSignal): { stream: Readable; happened: () => boolean } {
  const tail = new PassThrough();
  let cut = false;
  const stop = () => {
    if (tail.writableEnded || tail.destroyed) return;
    cut = true;
    body.unpipe(tail);
    tail.end();
  };
  finished(body, (err) => {
    if (err) stop();
  });
  signal?.addEventListener('abort', stop, { once: true });
  body.pipe(tail);
  return { stream: tail, happened: () => cut };
}

/**
 * follow pipes `body` into a stream that fails when `body` fails or closes early (pipe() alone
 * does not pass errors on) and whose destruction leaves `body` itself readable.
 */
function follow(body: Readable): Readable {
  const tail = new PassThrough();
  finished(body, (err) => {
    if (err) tail.destroy(err);
  });
  return body.pipe(tail);
}
