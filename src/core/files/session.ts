/**
 * FileSession: every file operation a front end may ask for, on behalf of one Principal, in the
 * paths that principal sees. FTP, SFTP and WebDAV see their user_root as `/`; the REST API sees
 * site paths. Each call normalizes the path, checks the permission, does the work and records its
 * Action, here, once (DESIGN.md's one rule). Adapters never see a row or a blob.
 */
import { join as pathJoin } from 'node:path';
import type { EntityManager } from 'typeorm';
import type { Readable } from 'node:stream';
import type { FileRow } from '../../db/entities.ts';
import { requireCapability, rightsOn, type Capability } from '../access/rights.ts';
import { recordAction, type ActionName } from '../actions/record.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import { baseName, isInside, joinPath, normalizeFilePath, parentOf } from '../paths.ts';
import type { Principal } from '../principal.ts';
import type { BlobStore, ByteRange } from './blobstore.ts';
import type { Blobs } from './blobs.ts';
import { requireUnlocked } from './locks.ts';
import {
  copyTree,
  countRows,
  deleteTree,
  ensureFolders,
  getRow,
  hasChildren,
  insertFolder,
  listRows,
  moveTree,
  requireFolder,
  setMtimeOf,
  toEntry,
  type Entry,
  type ListOptions,
} from './namespace.ts';
import {
  dropPending,
  ownerOf,
  pendingAt,
  pendingEntry,
  pendingIn,
  type PendingVersionRow,
} from './pending.ts';
import { copyDav, forgetDav, moveDav } from './properties.ts';
import type { SpareFiles } from './spares.ts';
import { StagedWrite } from './staging.ts';
import { changeTree } from './tree.ts';
import { WriteHandle, type SendOptions, type WriteScope } from './write.ts';

/** stagingDir is where staged writes keep their temporary files. */
export function stagingDir(dataDir: string): string {
  return pathJoin(dataDir, 'staging');
}

/** WriteOptions shape an upload: where it starts and what it keeps. */
export interface WriteOptions extends SendOptions {
  /** keep this many bytes of the current content and write the body after them (FTP REST+STOR) */
  offset?: number;
  /** write the body after the whole current content (FTP APPE) */
  append?: boolean;
  /** `offset` must be the size of the user's pending version, which the body continues (WebDAV Content-Range) */
  resume?: boolean;
  /**
   * before hears the path as it was when the upload was opened (WriteHandle.before: as stat shows
   * it, null when absent or not listable), before a byte is read; throwing refuses the upload.
   */
  before?: (entry: Entry | null) => void;
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
    /** the staging folder's files made ahead, which staged writes take */
    private readonly staging: SpareFiles,
    readonly principal: Principal,
    /** the site folder this session sees as `/` ('' for the site root) */
    readonly root: string,
    /** WebDAV lock tokens this request submitted (If header); the other front ends submit none */
    readonly lockTokens: ReadonlySet<string> = new Set(),
  ) {}

  /**
   * withLockTokens is this session for one request that submitted WebDAV lock tokens: its changes
   * may touch what those locks (held by this principal) cover.
   */
  withLockTokens(tokens: Iterable<string>): FileSession {
    return new FileSession(
      this.ctx,
      this.store,
      this.blobs,
      this.staging,
      this.principal,
      this.root,
      new Set(tokens),
    );
  }

  /** scope is what a write handle needs of this session. */
  private get scope(): WriteScope {
    return {
      ctx: this.ctx,
      store: this.store,
      blobs: this.blobs,
      principal: this.principal,
      lockTokens: this.lockTokens,
      root: this.root,
      site: (path) => this.site(path),
      visible: (site) => this.visible(site),
    };
  }

  /** unlocked refuses a change of `site` under a WebDAV lock whose token this request lacks. */
  private unlocked(em: EntityManager, site: string, descendants = false): Promise<void> {
    return requireUnlocked(em, this.principal, this.lockTokens, site, { descendants, show: this.show });
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
      await requireCapability(em, this.principal, cap, site, this.show);
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

  /**
   * stat describes a file or folder. To a user with a pending version of a file (a cut upload,
   * pending.ts) it describes that: its size is where a resume starts (FTP SIZE, SFTP stat, …).
   */
  async stat(path: string): Promise<Entry> {
    const site = this.site(path);
    const { row, pending } = await this.ctx.db.read(async (em) => {
      await requireCapability(em, this.principal, 'list', site, this.show);
      return { row: await getRow(em, site), pending: await pendingAt(em, ownerOf(this.principal), site) };
    });
    if (pending && row?.type !== 'directory') return pendingEntry(pending, this.visible(site));
    if (!row) throw new GatewayError('not-found/file-not-found', `/${this.visible(site)} does not exist`);
    return toEntry(row, this.visible(site));
  }

  /**
   * rights lists what the principal may do on a path (the web page offers only those actions);
   * the checks themselves stay in each operation.
   */
  async rights(path: string): Promise<Capability[]> {
    const site = this.site(path);
    const caps = await this.ctx.db.read((em) => rightsOn(em, this.principal, site));
    return [...caps].sort();
  }

  /**
   * requireDownload authorizes reading everything below `path` at once (a zip of a folder), before
   * the first byte: rights only grow below a folder, so read on it covers what is inside. Each
   * file's openRead still checks and records its own read.
   */
  async requireDownload(path: string): Promise<void> {
    const site = this.site(path);
    await this.ctx.db.read((em) => requireCapability(em, this.principal, 'read', site, this.show));
  }

  /**
   * listAll reads every entry of a folder in name order, a page at a time, as list shows them (a
   * pending version of a new file after the folder's rows): what PROPFIND, MLSD, LIST, SFTP READDIR
   * and zip stream. Each page starts after the last name of the one before, so a folder of any size
   * costs one indexed read per page; no transaction is held between pages.
   */
  async *listAll(path: string, pageSize = 500): AsyncGenerator<Entry[]> {
    const site = this.site(path);
    const owner = ownerOf(this.principal);
    let after: string | undefined;
    let pending: Map<string, PendingVersionRow> | undefined;
    for (;;) {
      const rows = await this.ctx.db.read(async (em) => {
        if (!pending) {
          await requireCapability(em, this.principal, 'list', site, this.show);
          await requireFolder(em, site, 'not-found/folder-not-found', this.show);
          pending = new Map((await pendingIn(em, owner, site)).map((p) => [p.path, p]));
        }
        return listRows(em, site, { sort: 'path', direction: 'asc', offset: 0, limit: pageSize, after });
      });
      if (rows.length)
        yield rows.map((r) => {
          const p = r.type === 'file' ? pending!.get(r.path) : undefined;
          return p ? pendingEntry(p, this.visible(r.path)) : toEntry(r, this.visible(r.path));
        });
      if (rows.length < pageSize) break;
      after = rows[rows.length - 1]!.name;
    }
    if (!pending!.size) return;
    // Pending versions of files that have no row yet come last, in name order.
    const sorted = [...pending!.values()].sort((a, b) => (a.path < b.path ? -1 : 1));
    const extra = await this.ctx.db.read(async (em) => {
      const out: Entry[] = [];
      for (const p of sorted)
        if (!(await getRow(em, p.path))) out.push(pendingEntry(p, this.visible(p.path)));
      return out;
    });
    for (let i = 0; i < extra.length; i += pageSize) yield extra.slice(i, i + pageSize);
  }

  /**
   * list reads one page of a folder's entries, as its user sees them: a file with their pending
   * version has its size, and a pending version of a new file is listed on the last page.
   */
  async list(path: string, opts: ListOptions): Promise<Entry[]> {
    const site = this.site(path);
    return this.ctx.db.read(async (em) => {
      await requireCapability(em, this.principal, 'list', site, this.show);
      await requireFolder(em, site, 'not-found/folder-not-found', this.show);
      const rows = await listRows(em, site, opts);
      const pending = new Map((await pendingIn(em, ownerOf(this.principal), site)).map((p) => [p.path, p]));
      const entries = rows.map((r) => {
        const p = r.type === 'file' ? pending.get(r.path) : undefined;
        return p ? pendingEntry(p, this.visible(r.path)) : toEntry(r, this.visible(r.path));
      });
      // Pending versions of new files come after the folder's rows, in name order, as if they were
      // the last rows: a page past the rows holds the rest of them, and the page after is empty.
      const search = opts.search?.toLowerCase();
      const extra: PendingVersionRow[] = [];
      for (const p of [...pending.values()].sort((a, b) => (a.path < b.path ? -1 : 1)))
        if (!(search && !baseName(p.path).toLowerCase().includes(search)) && !(await getRow(em, p.path)))
          extra.push(p);
      if (extra.length && rows.length < opts.limit) {
        const total =
          rows.length > 0 || opts.offset === 0
            ? opts.offset + rows.length
            : await countRows(em, site, opts.search);
        const from = Math.max(0, opts.offset - total);
        const to = opts.offset + opts.limit - total;
        for (const p of extra.slice(from, to)) entries.push(pendingEntry(p, this.visible(p.path)));
      }
      return entries;
    });
  }

  /** mkdir creates a folder; `parents` also creates missing ancestors (REST), else the parent must exist (FTP, WebDAV). */
  async mkdir(path: string, opts: { parents?: boolean } = {}): Promise<Entry> {
    const site = this.site(path);
    if (site === this.root)
      throw new GatewayError('processing-failure/destination-exists', 'The root folder always exists');
    return changeTree(this.ctx, { changes: [site] }, async (em) => {
      await requireCapability(em, this.principal, 'write', site, this.show);
      await this.unlocked(em, site);
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
    await changeTree(this.ctx, { changes: [site] }, async (em) => {
      await requireCapability(em, this.principal, 'delete', site, this.show);
      await this.unlocked(em, site, true);
      const row = await getRow(em, site);
      // Deleting a path also gives up the caller's own cut upload of it (pending.ts), which is all
      // there is of a new file to its uploader.
      const user = ownerOf(this.principal);
      if (row?.type !== 'directory' && (await pendingAt(em, user, site))) {
        await dropPending(em, user, site);
        if (!row) return;
      }
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
    const locks = kind === 'move' ? { changes: [source, dest] } : { changes: [dest], reads: [source] };
    await changeTree(this.ctx, locks, async (em) => {
      await requireCapability(em, this.principal, kind === 'move' ? 'delete' : 'read', source, this.show);
      await requireCapability(em, this.principal, 'write', dest, this.show);
      if (kind === 'move') await this.unlocked(em, source, true);
      await this.unlocked(em, dest, true);
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
        await requireCapability(em, this.principal, 'delete', dest, this.show);
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
    return changeTree(this.ctx, { changes: [site] }, async (em) => {
      await requireCapability(em, this.principal, 'write', site, this.show);
      await this.unlocked(em, site);
      const row = site === '' ? null : await setMtimeOf(em, site, mtime);
      if (!row) throw new GatewayError('not-found/file-not-found', `/${this.visible(site)} does not exist`);
      return toEntry(row, this.visible(site));
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
    if (this.blobs.heldOnOpen) return this.openHeld(site, opts);
    // One unit of work: the check, the row, the lease on its blob, the Action. When the file was
    // replaced between the row's read and the lease (blobs.ts "Races"), again with the new row.
    const leased = async (em: EntityManager) => {
      await requireCapability(em, this.principal, 'read', site, this.show);
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
    // Not synced on its own: a lease matters only while this process lives, the Action as openHeld's.
    let got = await this.ctx.db.work(leased, { durable: false });
    for (let again = 0; !got && again < 5; again++) got = await this.ctx.db.work(leased, { durable: false });
    if (!got) throw new GatewayError('not-found/file-not-found', `/${this.visible(site)} keeps changing`);
    const { row, lease } = got;
    const stream = await this.blobs.opened(lease, {
      ...(opts.range ? { range: opts.range } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    return { entry: toEntry(row, this.visible(site)), blobId: row.blob_id!, stream };
  }

  /**
   * openHeld is openRead on a store whose open blob holds its bytes (blobs.ts "Leases"): the check
   * and the row are read, the blob opened, and the `read` Action recorded (not synced on its own:
   * it changes no file, and the next durable commit carries it), so a download writes one row.
   */
  private async openHeld(
    site: string,
    opts: { range?: ByteRange; record?: boolean; signal?: AbortSignal },
  ): Promise<Download> {
    for (let again = 0; again < 5; again++) {
      const row = await this.ctx.db.read(async (em) => {
        await requireCapability(em, this.principal, 'read', site, this.show);
        return getRow(em, site);
      });
      if (!row) throw new GatewayError('not-found/file-not-found', `/${this.visible(site)} does not exist`);
      if (row.type === 'directory')
        throw new GatewayError('bad-request/cannot-download-directory', 'A folder cannot be downloaded');
      const size = row.size ?? 0;
      checkRange(opts.range, size);
      const range = knownRange(opts.range, size);
      const stream = await this.blobs.openHeld(row.blob_id!, {
        ...(range ? { range } : {}),
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
      if (!stream) continue;
      if (opts.record !== false) {
        try {
          await this.ctx.db.work((em) => this.record(em, 'read', site), { durable: false });
        } catch (err) {
          stream.destroy();
          throw err;
        }
      }
      return { entry: toEntry(row, this.visible(site)), blobId: row.blob_id!, stream };
    }
    throw new GatewayError('not-found/file-not-found', `/${this.visible(site)} keeps changing`);
  }

  /**
   * recordRead records the `read` Action of a file opened with `record: false` once its bytes are
   * first read (SFTP: an OPEN whose handle is only the source of a copy-data reads nothing).
   */
  async recordRead(path: string): Promise<void> {
    const site = this.site(path);
    // Not synced on its own, as openRead's (openHeld).
    await this.ctx.db.work((em) => this.record(em, 'read', site), { durable: false });
  }

  /** describeDownload checks read permission and records the `read` Action for a signed download URL. */
  async prepareDownload(path: string): Promise<{ entry: Entry; row: FileRow }> {
    const { site, row } = await this.row(path, 'read');
    if (row.type === 'directory')
      throw new GatewayError('bad-request/cannot-download-directory', 'A folder cannot be downloaded');
    await this.ctx.db.work((em) => this.record(em, 'read', site), { durable: false });
    return { entry: toEntry(row, this.visible(site)), row };
  }

  /**
   * openWrite starts an upload of `path` (the write pipeline, write.ts): rights, WebDAV locks and
   * the parent are checked now, before any byte moves. `offset` or `append` keep bytes of the
   * current content before the body (FTP REST+STOR, APPE).
   */
  openWrite(
    path: string,
    opts: { offset?: number; append?: boolean; resume?: boolean } = {},
  ): Promise<WriteHandle> {
    return WriteHandle.open(this.scope, path, opts);
  }

  /**
   * stage starts a staged write of `path` (SFTP: WRITE at any offset, then commit on CLOSE):
   * checked now like openWrite, the bytes go to a temporary file under <data_dir>/staging, and the
   * commit goes through the same write handle. Without `truncate` it starts from the current
   * content, which needs the read right.
   */
  async stage(path: string, opts: { truncate: boolean; signal?: AbortSignal }): Promise<StagedWrite> {
    const handle = await this.openWrite(path);
    const signal = opts.signal ? { signal: opts.signal } : {};
    try {
      // The user's pending version, when there is one, is the current content (OpenSSH `reput`
      // opens without TRUNC and writes from its size on); a truncating open is a new upload.
      if (opts.truncate) await handle.discardPending();
      const current = opts.truncate
        ? null
        : handle.pending
          ? await this.blobs.open(handle.pending.blob_id, signal)
          : (handle.existing?.size ?? 0) > 0
            ? (await this.openRead(path, { record: false, ...signal })).stream
            : null;
      return await StagedWrite.open(handle, this.staging, current, opts.truncate);
    } catch (err) {
      await handle.abort();
      throw err;
    }
  }

  /**
   * write streams `body` into the file at `path` and commits it atomically when the body ends:
   * a new file is a `create` Action, an overwrite an `update`. With `offset` or `append` the kept
   * bytes of the current content come first. On error or abort nothing changes.
   */
  async write(path: string, body: Readable, opts: WriteOptions = {}): Promise<Entry> {
    let handle: WriteHandle;
    try {
      handle = await this.openWrite(path, {
        ...(opts.offset !== undefined ? { offset: opts.offset } : {}),
        ...(opts.append ? { append: true } : {}),
        ...(opts.resume ? { resume: true } : {}),
      });
    } catch (err) {
      body.resume();
      throw err;
    }
    try {
      opts.before?.(handle.before);
    } catch (err) {
      await handle.abort();
      body.resume();
      throw err;
    }
    return handle.send(body, {
      ...(opts.mtime ? { mtime: opts.mtime } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
  }
}

/**
 * knownRange is what a download reads of a file of `size` bytes: the range asked for, or the whole
 * file, always ending at a known byte. The store then reads no further (no read that only finds the
 * end) and sizes its buffer to the file: a 4 KiB file, or the rest of it after an SFTP READ's or FTP
 * REST's offset, is one read, handed over whole (blobstore.ts withBytes).
 */
function knownRange(range: ByteRange | undefined, size: number): ByteRange | undefined {
  if (range) return range.end === undefined ? { start: range.start, end: size - 1 } : range;
  return size > 0 ? { start: 0, end: size - 1 } : undefined;
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
