/**
 * Files: the file side of the core. It hands each principal a FileSession rooted where that
 * principal belongs, serves signed download URLs, runs multi-step uploads, and runs the background
 * work: the safety-net collection of garbage blobs (blobs.ts reclaims them as soon as nothing
 * holds them), upload expiry, and the sweeps of what a crash left on disk.
 */
import type { Readable } from 'node:stream';
import type { CoreContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import type { Principal } from '../principal.ts';
import type { BlobStore, ByteRange } from './blobstore.ts';
import { Blobs } from './blobs.ts';
import type { Entry } from './namespace.ts';
import { FileSession, stagingDir } from './session.ts';
import { DOWNLOAD_TTL_S, Signer } from './signed.ts';
import type { SpareFiles } from './spares.ts';
import { abandonedBy, STALE_STAGING_MS, stagingSpares, sweepStaging, TempOwners } from './staging.ts';
import path from 'node:path';
import { Uploads } from './uploads.ts';
import { expirePending, listPending, type PendingListing } from './pending.ts';

/**
 * STALE_PARTIAL_MS is how long a local store's temporary file of unknown writer (`<id>.partial`,
 * named before writers were recorded) may go unwritten before the sweep deletes it. Files of a
 * known writer go as soon as that writer is dead (staging.ts TempOwners).
 */
export const STALE_PARTIAL_MS = 60 * 60 * 1000;

interface DownloadClaims {
  b: string;
  n: string;
  s: number;
  m: string | null;
  t: number;
}

/** SignedDownload is what a signed download URL opens. */
export interface SignedDownload {
  name: string;
  size: number;
  md5: string | null;
  mtime: Date;
  blobId: string;
  stream: Readable;
}

/**
 * FileApi is what front ends use of the file service: a principal's file session, the multi-step
 * uploads, signed downloads. Storage, leases and background work stay inside (internals.ts).
 */
export interface FileApi {
  readonly uploads: Uploads;
  session(p: Principal): FileSession;
  downloadUrl(session: FileSession, path: string): Promise<{ entry: Entry; url: string }>;
  describeSigned(token: string): Omit<SignedDownload, 'stream'>;
  openSigned(token: string, range?: ByteRange, signal?: AbortSignal): Promise<SignedDownload>;
  /** pendingVersions lists the cut uploads kept for resuming, for a site admin. */
  pendingVersions(p: Principal): Promise<PendingListing[]>;
}

/** Files is the core's file service. */
export class Files implements FileApi {
  readonly uploads: Uploads;
  /** leases and garbage of this instance */
  readonly blobs: Blobs;
  private readonly downloads: Signer;
  private timer: NodeJS.Timeout | null = null;
  private partialsSweptAt = 0;
  /** the writers of temporary files in this data dir, alive or dead */
  private readonly owners: TempOwners;
  /** the staging folder's files made ahead for SFTP's staged writes */
  private readonly staging: SpareFiles;

  constructor(
    private readonly ctx: CoreContext,
    readonly store: BlobStore,
  ) {
    this.blobs = new Blobs(ctx, store);
    this.uploads = new Uploads(ctx, store, this.blobs);
    this.downloads = new Signer(ctx.secret, 'download');
    this.owners = new TempOwners(path.join(ctx.config.data_dir, 'owners'));
    this.staging = stagingSpares(stagingDir(ctx.config.data_dir));
  }

  /**
   * session gives the principal's file session: FTP, SFTP and WebDAV see the user's user_root as
   * `/`, the REST API and site-wide keys see the whole site (DESIGN.md "Login gate").
   */
  session(p: Principal): FileSession {
    const rooted = p.interface === 'ftp' || p.interface === 'sftp' || p.interface === 'dav';
    const root = rooted && p.user ? p.user.user_root.replace(/\/$/, '') : '';
    return new FileSession(this.ctx, this.store, this.blobs, this.staging, p, root);
  }

  /** downloadUrl checks read permission, records the `read` Action and signs a URL valid 3 minutes. */
  async downloadUrl(session: FileSession, path: string): Promise<{ entry: Entry; url: string }> {
    const { entry, row } = await session.prepareDownload(path);
    // The bytes stay while the URL is valid, even if the file is deleted or replaced meanwhile.
    if (!(await this.blobs.holdForUrl(row.blob_id!, new Date(Date.now() + DOWNLOAD_TTL_S * 1000))))
      throw new GatewayError('not-found/file-not-found', 'This file no longer exists');
    const claims: DownloadClaims = {
      b: row.blob_id!,
      n: row.name,
      s: row.size ?? 0,
      m: row.md5,
      t: row.mtime.getTime(),
    };
    return {
      entry,
      url: `${this.ctx.config.public_url}/download/${this.downloads.sign({ ...claims }, DOWNLOAD_TTL_S)}`,
    };
  }

  /** describeSigned reads a download token's claims without opening the blob (HEAD, range checks). */
  describeSigned(token: string): Omit<SignedDownload, 'stream'> {
    const c = this.downloads.verify<DownloadClaims>(token);
    return { name: c.n, size: c.s, md5: c.m, mtime: new Date(c.t), blobId: c.b };
  }

  /**
   * openSigned opens the bytes behind a download token; blobs are immutable, so the token names
   * them directly. The blob is leased while the stream is open; one already collected (the file
   * was deleted or replaced) is file-not-found.
   */
  async openSigned(token: string, range?: ByteRange, signal?: AbortSignal): Promise<SignedDownload> {
    const d = this.describeSigned(token);
    const stream = await this.blobs.open(d.blobId, {
      ...(range ? { range } : {}),
      ...(signal ? { signal } : {}),
    });
    return { ...d, stream };
  }

  /** pendingVersions lists the cut uploads kept for resuming (pending.ts), for a site admin. */
  pendingVersions(p: Principal): Promise<PendingListing[]> {
    return listPending(this.ctx, p);
  }

  /**
   * collectGarbage is the safety net behind the prompt reclaim: it expires abandoned uploads and
   * pending versions of cut uploads past `uploads.pending_hours`, drops
   * expired leases (instances that died) and deletes every garbage blob no row refers to and no
   * live lease holds. Returns how many blobs it deleted.
   */
  async collectGarbage(): Promise<number> {
    await this.uploads.expire();
    const expired = await expirePending(this.ctx);
    if (expired) this.ctx.log.info('expired pending versions of cut uploads', { count: expired });
    return this.blobs.collect();
  }

  /**
   * sweepStaging deletes the staged-upload temporary files a crash left behind: those of a dead
   * writer at once, those of unknown writer after `olderThanMs` (STALE_STAGING_MS).
   */
  async sweepStaging(olderThanMs = STALE_STAGING_MS, dead = new Set<string>()): Promise<number> {
    const abandoned = abandonedBy(this.owners, olderThanMs, dead);
    const deleted = await sweepStaging(stagingDir(this.ctx.config.data_dir), abandoned);
    if (deleted) this.ctx.log.info('deleted stale staging files', { count: deleted });
    return deleted;
  }

  /**
   * sweepPartials deletes the blob store's temporary files of puts a crash interrupted: those of a
   * dead writer at once, those of unknown writer after `olderThanMs` (STALE_PARTIAL_MS).
   */
  async sweepPartials(olderThanMs = STALE_PARTIAL_MS, dead = new Set<string>()): Promise<number> {
    const deleted = (await this.store.sweep?.(abandonedBy(this.owners, olderThanMs, dead))) ?? 0;
    if (deleted) this.ctx.log.info('deleted stale partial blobs', { count: deleted });
    return deleted;
  }

  /**
   * sweepCrashed removes what dead processes left: their leases (so the blobs they were writing,
   * recorded as garbage before their bytes, are collected), their staging and partial files, then
   * their owner files. At start it finds a process killed on this host at once.
   */
  async sweepCrashed(opts: { partials: boolean }): Promise<void> {
    const dead = await this.blobs.dropDeadLeases(this.owners);
    await this.sweepStaging(STALE_STAGING_MS, dead);
    if (opts.partials) await this.sweepPartials(STALE_PARTIAL_MS, dead);
    if (dead.size) await this.collectGarbage();
    await this.owners.forget(dead);
  }

  /**
   * startBackground beats this process's owner file and sweeps what crashed processes left now,
   * then runs garbage collection, upload expiry and the sweeps every minute until stop.
   */
  async startBackground(): Promise<void> {
    if (this.timer) return;
    await this.owners.start();
    const sweep = async () => {
      // Listing every blob folder is not free: at start, then every quarter of the margin.
      const partials = Date.now() - this.partialsSweptAt >= STALE_PARTIAL_MS / 4;
      if (partials) this.partialsSweptAt = Date.now();
      await this.sweepCrashed({ partials }).catch((err: unknown) => {
        this.ctx.log.warn('sweep of crash leftovers failed', { error: String(err) });
      });
    };
    this.timer = setInterval(() => {
      this.collectGarbage().catch((err: unknown) =>
        this.ctx.log.warn('garbage collection failed', { error: String(err) }),
      );
      void sweep();
    }, 60_000);
    this.timer.unref();
    await sweep();
    // Whatever earlier runs left as garbage (a crash between a commit and its reclaim).
    await this.collectGarbage().catch((err: unknown) =>
      this.ctx.log.warn('garbage collection failed', { error: String(err) }),
    );
  }

  /** stop ends the background work and closes the blob store. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.blobs.stop();
    await this.staging.close();
    await this.owners.stop();
    await this.store.close();
  }
}
