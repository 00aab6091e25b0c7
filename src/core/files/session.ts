/**
 * FileSession: every file operation a front end may ask for, on behalf of one Principal, in the
 * paths that principal sees. FTP, SFTP and WebDAV see their user_root as `/`; the REST API sees
 * site paths. Each call normalizes the path, checks the permission, does the work and records its
 * Action, here, once (DESIGN.md's one rule). Adapters never see a row or a blob.
 */
import { join as pathJoin } from 'node:path';
import type { EntityManager } from 'typeorm';
import type { Readable } from 'node:stream';
import { FileEntity, type FileRow } from '../../db/entities.ts';
import { requireCapability, type Capability } from '../access/rights.ts';
import { recordAction, type ActionName } from '../actions/record.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import { isInside, joinPath, normalizeFilePath, parentOf } from '../paths.ts';
import type { Principal } from '../principal.ts';
import type { BlobStore, ByteRange } from './blobstore.ts';
import type { Blobs, NewBlob } from './blobs.ts';
import {
  copyTree,
  deleteTree,
  ensureFolders,
  getRow,
  hasChildren,
  insertFolder,
  listRows,
  markGarbage,
  moveTree,
  requireFolder,
  toEntry,
  type Entry,
  type ListOptions,
} from './namespace.ts';
import { copyDav, forgetDav, moveDav } from './properties.ts';
import { concat, Hasher } from './transfers.ts';
import { StagedWrite } from './staging.ts';

/** stagingDir is where staged writes keep their temporary files. */
export function stagingDir(dataDir: string): string {
  return pathJoin(dataDir, 'staging');
}

/** WriteOptions shape an upload: where it starts and what it keeps. */
export interface WriteOptions {
  /** keep this many bytes of the current content and write the body after them (FTP REST+STOR) */
  offset?: number;
  /** write the body after the whole current content (FTP APPE) */
  append?: boolean;
  /** the client's modification time for the file, if it sent one */
  mtime?: Date;
  /** aborting discards the upload and keeps the old content */
  signal?: AbortSignal;
}

/** Download is an opened file: its entry and a stream of the requested bytes. */
export interface Download {
  entry: Entry;
  /** the blob the bytes come from; immutable, so it doubles as a strong ETag */
  blobId: string;
  stream: Readable;
}

/** FileSession performs file operations for one principal under one root. */
export class FileSession {
  constructor(
    private readonly ctx: CoreContext,
    private readonly store: BlobStore,
    /** leases and garbage: a read holds its blob, a new blob is pending until its commit */
    readonly blobs: Blobs,
    readonly principal: Principal,
    /** the site folder this session sees as `/` ('' for the site root) */
    readonly root: string,
  ) {}

  /** blobStore is the store this session's files live in (for core helpers such as staging). */
  get blobStore(): BlobStore {
    return this.store;
  }

  /** site maps a path as the client sees it to the normalized site path. */
  site(path: string): string {
    return joinPath(this.root, normalizeFilePath(path));
  }

  /** show is visible() for error messages, which must not reveal the user's root. */
  private readonly show = (sitePath: string): string => this.visible(sitePath);

  /** visible maps a site path back to the client's view. */
  visible(sitePath: string): string {
    return this.root === '' ? sitePath : sitePath === this.root ? '' : sitePath.slice(this.root.length + 1);
  }

  private async row(path: string, cap: Capability): Promise<{ site: string; row: FileRow }> {
    const site = this.site(path);
    const row = await this.ctx.db.read(async (em) => {
      await requireCapability(em, this.principal, cap, site);
      return getRow(em, site);
    });
    if (!row) throw new GatewayError('not-found/file-not-found', `/${this.visible(site)} does not exist`);
    return { site, row };
  }

  private record(
    em: Parameters<typeof recordAction>[0],
    action: ActionName,
    path: string,
    extra: { source?: string; destination?: string; size?: number } = {},
  ) {
    return recordAction(em, this.principal, { action, path, ...extra });
  }

  /** stat describes a file or folder. */
  async stat(path: string): Promise<Entry> {
    const { site, row } = await this.row(path, 'list');
    return toEntry(row, this.visible(site));
  }

  /** list reads one page of a folder's entries. */
  async list(path: string, opts: ListOptions): Promise<Entry[]> {
    const site = this.site(path);
    return this.ctx.db.read(async (em) => {
      await requireCapability(em, this.principal, 'list', site);
      await requireFolder(em, site, 'not-found/folder-not-found', this.show);
      return (await listRows(em, site, opts)).map((r) => toEntry(r, this.visible(r.path)));
    });
  }

  /** mkdir creates a folder; `parents` also creates missing ancestors (REST), else the parent must exist (FTP, WebDAV). */
  async mkdir(path: string, opts: { parents?: boolean } = {}): Promise<Entry> {
    const site = this.site(path);
    if (site === this.root)
      throw new GatewayError('processing-failure/destination-exists', 'The root folder always exists');
    return this.ctx.db.work(async (em) => {
      await requireCapability(em, this.principal, 'write', site);
      const existing = await getRow(em, site);
      if (existing)
        throw new GatewayError(
          'processing-failure/destination-exists',
          `/${this.visible(site)} already exists`,
        );
      if (opts.parents) await ensureFolders(em, site, this.show);
      else {
        await requireFolder(
          em,
          parentOf(site),
          'processing-failure/destination-parent-does-not-exist',
          this.show,
        );
        await insertFolder(em, site);
      }
      await this.record(em, 'create', site);
      return toEntry((await getRow(em, site))!, this.visible(site));
    });
  }

  /** remove deletes a file, an empty folder, or with `recursive` a folder and everything in it. */
  async remove(path: string, opts: { recursive?: boolean } = {}): Promise<void> {
    const site = this.site(path);
    if (site === this.root)
      throw new GatewayError('not-authorized/full-permission-required', 'The root folder cannot be deleted');
    await this.ctx.db.work(async (em) => {
      await requireCapability(em, this.principal, 'delete', site);
      const row = await getRow(em, site);
      if (!row) throw new GatewayError('not-found/file-not-found', `/${this.visible(site)} does not exist`);
      if (row.type === 'directory' && !opts.recursive && (await hasChildren(em, site))) {
        throw new GatewayError('processing-failure/folder-not-empty', `/${this.visible(site)} is not empty`);
      }
      await deleteTree(em, row);
      await forgetDav(em, site);
      await this.record(em, 'destroy', site);
    });
  }

  /** move renames or moves a file or folder; `overwrite` replaces an existing file at the destination. */
  async move(from: string, to: string, opts: { overwrite?: boolean } = {}): Promise<void> {
    await this.relocate('move', from, to, opts);
  }

  /**
   * copy copies a file or folder; the copies share the immutable blobs, so no bytes are copied.
   * With `filesOnly` (SFTP copy-data) the source must be a file and an existing destination may
   * only be a file: a folder that appeared there meanwhile is never replaced.
   */
  async copy(
    from: string,
    to: string,
    opts: { overwrite?: boolean; filesOnly?: boolean } = {},
  ): Promise<void> {
    await this.relocate('copy', from, to, opts);
  }

  private async relocate(
    kind: 'move' | 'copy',
    from: string,
    to: string,
    opts: { overwrite?: boolean; filesOnly?: boolean },
  ): Promise<void> {
    const source = this.site(from);
    const dest = this.site(to);
    if (source === this.root)
      throw new GatewayError('bad-request/invalid-path', 'The root folder cannot be moved or copied');
    if (source === dest)
      throw new GatewayError('bad-request/destination-same', 'Source and destination are the same');
    if (isInside(dest, source)) {
      throw new GatewayError(
        'processing-failure/destination-parent-conflict',
        'A folder cannot be moved or copied into itself',
      );
    }
    await this.ctx.db.work(async (em) => {
      await requireCapability(em, this.principal, kind === 'move' ? 'delete' : 'read', source);
      await requireCapability(em, this.principal, 'write', dest);
      const row = await getRow(em, source);
      if (!row) throw new GatewayError('not-found/file-not-found', `/${this.visible(source)} does not exist`);
      if (opts.filesOnly && row.type === 'directory')
        throw new GatewayError(
          'bad-request/cannot-download-directory',
          `/${this.visible(source)} is a folder`,
        );
      await requireFolder(
        em,
        parentOf(dest),
        'processing-failure/destination-parent-does-not-exist',
        this.show,
      );
      const existing = await getRow(em, dest);
      if (existing && opts.filesOnly && existing.type === 'directory')
        throw new GatewayError('processing-failure/destination-exists', `/${this.visible(dest)} is a folder`);
      if (existing) {
        if (!opts.overwrite)
          throw new GatewayError(
            'processing-failure/destination-exists',
            `/${this.visible(dest)} already exists`,
          );
        await requireCapability(em, this.principal, 'delete', dest);
        await deleteTree(em, existing);
        await forgetDav(em, dest);
      }
      // WebDAV's dead properties follow the file, in the same unit of work.
      if (kind === 'move') {
        await moveTree(em, row, dest);
        await moveDav(em, source, dest);
      } else {
        await copyTree(em, row, dest);
        await copyDav(em, source, dest);
      }
      await this.record(em, kind, dest, { source, destination: dest });
    });
  }

  /** setMtime sets a file's or folder's modification time (SFTP SETSTAT, FTP MFMT, WebDAV Win32LastModifiedTime). */
  async setMtime(path: string, mtime: Date): Promise<Entry> {
    const site = this.site(path);
    return this.ctx.db.work(async (em) => {
      await requireCapability(em, this.principal, 'write', site);
      const row = await getRow(em, site);
      if (!row || site === '')
        throw new GatewayError('not-found/file-not-found', `/${this.visible(site)} does not exist`);
      await em.update(FileEntity, { id: row.id }, { mtime });
      return toEntry({ ...row, mtime }, this.visible(site));
    });
  }

  /**
   * openRead opens a file's bytes (or an inclusive range) and records a `read` Action unless
   * `record` is false (REST `action=stat`, WebDAV HEAD).
   */
  async openRead(
    path: string,
    opts: { range?: ByteRange; record?: boolean; signal?: AbortSignal } = {},
  ): Promise<Download> {
    const site = this.site(path);
    // One unit of work: the check, the row, the lease on its blob, the Action. When the file was
    // replaced between the row's read and the lease (blobs.ts "Races"), again with the new row.
    const leased = async (em: EntityManager) => {
      await requireCapability(em, this.principal, 'read', site);
      const row = await getRow(em, site);
      if (!row) throw new GatewayError('not-found/file-not-found', `/${this.visible(site)} does not exist`);
      if (row.type === 'directory')
        throw new GatewayError('bad-request/cannot-download-directory', 'A folder cannot be downloaded');
      checkRange(opts.range, row.size ?? 0);
      const blobId = row.blob_id!;
      const lease = await this.blobs.lease(
        em,
        blobId,
        async () => (await getRow(em, site))?.blob_id === blobId,
      );
      if (lease && opts.record !== false) await this.record(em, 'read', site);
      return lease && { row, lease };
    };
    let got = await this.ctx.db.work(leased);
    for (let again = 0; !got && again < 5; again++) got = await this.ctx.db.work(leased);
    if (!got) throw new GatewayError('not-found/file-not-found', `/${this.visible(site)} keeps changing`);
    const { row, lease } = got;
    const stream = await this.blobs.opened(lease, {
      ...(opts.range ? { range: opts.range } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    return { entry: toEntry(row, this.visible(site)), blobId: row.blob_id!, stream };
  }

  /** describeDownload checks read permission and records the `read` Action for a signed download URL. */
  async prepareDownload(path: string): Promise<{ entry: Entry; row: FileRow }> {
    const { site, row } = await this.row(path, 'read');
    if (row.type === 'directory')
      throw new GatewayError('bad-request/cannot-download-directory', 'A folder cannot be downloaded');
    await this.ctx.db.work((em) => this.record(em, 'read', site));
    return { entry: toEntry(row, this.visible(site)), row };
  }

  /** checkWritable verifies, before any byte moves, that `path` may be written: permission, parent folder, not a folder. */
  async checkWritable(path: string): Promise<{ site: string; existing: FileRow | null }> {
    const site = this.site(path);
    if (site === this.root)
      throw new GatewayError('bad-request/invalid-path', 'The root folder is not a file');
    return this.ctx.db.read(async (em) => {
      await requireCapability(em, this.principal, 'write', site);
      await requireFolder(
        em,
        parentOf(site),
        'processing-failure/destination-parent-does-not-exist',
        this.show,
      );
      const existing = await getRow(em, site);
      if (existing?.type === 'directory') {
        throw new GatewayError('processing-failure/destination-exists', `/${this.visible(site)} is a folder`);
      }
      return { site, existing };
    });
  }

  /**
   * stage starts a staged write of `path` (SFTP: WRITE at any offset, then commit on CLOSE):
   * permission and parent are checked now, the bytes go to a temporary file under
   * <data_dir>/staging, and commit() runs the same atomic commit as write().
   */
  async stage(path: string, opts: { truncate: boolean; signal?: AbortSignal }): Promise<StagedWrite> {
    return StagedWrite.open(this, stagingDir(this.ctx.config.data_dir), path, opts);
  }

  /**
   * write streams `body` into the file at `path` and commits it atomically when the body ends:
   * a new file is a `create` Action, an overwrite an `update`. With `offset` or `append` the kept
   * bytes of the current content come first. On error or abort nothing changes.
   */
  async write(path: string, body: Readable, opts: WriteOptions = {}): Promise<Entry> {
    const { site, existing } = await this.checkWritable(path);
    const keep = opts.append ? (existing?.size ?? 0) : (opts.offset ?? 0);
    if (keep < 0 || keep > (existing?.size ?? 0)) {
      body.resume();
      throw new GatewayError(
        'bad-request/invalid-upload-offset',
        `The offset ${keep} is beyond the file's ${existing?.size ?? 0} bytes`,
      );
    }
    const sources: (() => Promise<Readable> | Readable)[] = [];
    if (keep > 0)
      sources.push(() => this.blobs.open(existing!.blob_id!, { range: { start: 0, end: keep - 1 } }));
    sources.push(() => body);
    return this.commitBlob(site, sources.length === 1 ? body : concat(sources), existing, opts);
  }

  /**
   * commitBlob streams `source` into a new blob through the hasher and points the row at it in one
   * unit of work. Shared by write() and the multi-step upload's end.
   */
  async commitBlob(
    site: string,
    source: Readable,
    expectedOld: FileRow | null,
    opts: { mtime?: Date; signal?: AbortSignal } = {},
  ): Promise<Entry> {
    const hasher = new Hasher();
    // Listened to before the first await: a body that fails meanwhile must not be unhandled.
    source.once('error', (err) => hasher.destroy(err));
    const blob = await this.blobs.create().catch((err: unknown) => {
      source.destroy();
      throw err;
    });
    try {
      await this.store.put(blob.blobId, source.pipe(hasher), opts.signal ? { signal: opts.signal } : {});
    } catch (err) {
      source.destroy();
      await this.blobs.discard(blob.blobId, blob);
      if (opts.signal?.aborted)
        throw new GatewayError(
          'processing-failure/file-not-uploaded',
          'The upload was aborted; the file is unchanged',
        );
      throw err;
    }
    const { md5, crc32 } = hasher.digest();
    return this.commitRow(
      site,
      blob.blobId,
      { size: hasher.bytes, md5, crc32 },
      expectedOld,
      opts.mtime,
      blob,
    );
  }

  /**
   * commitRow points the row of `site` at a finished blob, taking away its pending mark when it is
   * `pending` (blobs.ts create). If that fails the blob is garbage again: reclaimed unless another
   * row refers to it (an upload part adopted as the file).
   */
  async commitRow(
    site: string,
    blobId: string,
    facts: { size: number; md5: string | null; crc32: string | null },
    _expectedOld: FileRow | null,
    mtime?: Date,
    pending?: NewBlob,
  ): Promise<Entry> {
    try {
      return await this.ctx.db.work(async (em) => {
        if (pending) await this.blobs.settle(em, pending);
        // Checked again: the folder may have gone, or become something else, while bytes streamed.
        await requireCapability(em, this.principal, 'write', site);
        await requireFolder(
          em,
          parentOf(site),
          'processing-failure/destination-parent-does-not-exist',
          this.show,
        );
        const row = await getRow(em, site);
        if (row?.type === 'directory')
          throw new GatewayError(
            'processing-failure/destination-exists',
            `/${this.visible(site)} is a folder`,
          );
        const values = {
          size: facts.size,
          md5: facts.md5,
          crc32: facts.crc32,
          blob_id: blobId,
          mtime: mtime ?? new Date(),
        };
        if (row) {
          await em.update(FileEntity, { id: row.id }, values);
          await markGarbage(em, [row.blob_id]);
        } else {
          await em.insert(FileEntity, {
            path: site,
            parent: parentOf(site),
            name: site.slice(site.lastIndexOf('/') + 1),
            type: 'file',
            ...values,
          });
        }
        await this.record(em, row ? 'update' : 'create', site, { size: values.size ?? undefined });
        return toEntry(
          {
            ...(row ?? { id: 0, path: site, parent: parentOf(site), name: '', type: 'file' }),
            ...values,
          } as FileRow,
          this.visible(site),
        );
      });
    } catch (err) {
      await this.blobs.discard(blobId, pending).catch(() => undefined);
      throw err;
    }
  }
}

/** checkRange refuses a range outside a file of `size` bytes. */
function checkRange(range: ByteRange | undefined, size: number): void {
  if (
    range &&
    (range.start < 0 ||
      range.start >= size ||
      (range.end !== undefined && (range.end < range.start || range.end >= size)))
  ) {
    throw new GatewayError(
      'processing-failure/invalid-range',
      `The range is outside the file's ${size} bytes`,
    );
  }
}
