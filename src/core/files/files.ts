/**
 * Files: the file side of the core. It hands each principal a FileSession rooted where that
 * principal belongs, serves signed download URLs, runs multi-step uploads, and collects blobs no
 * row refers to any more (after a grace period, so a download that opened the old blob of an
 * overwritten file can finish).
 */
import type { Readable } from 'node:stream';
import { LessThan } from 'typeorm';
import { BlobGarbageEntity, FileEntity, UploadEntity, UploadPartEntity } from '../../db/entities.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import type { Principal } from '../principal.ts';
import type { BlobStore, ByteRange } from './blobstore.ts';
import type { Entry } from './namespace.ts';
import { FileSession, stagingDir } from './session.ts';
import { DOWNLOAD_TTL_S, Signer } from './signed.ts';
import { sweepStaging } from './staging.ts';
import { Uploads } from './uploads.ts';

/** GARBAGE_GRACE_MS is how long an unreferenced blob is kept before it is deleted. */
export const GARBAGE_GRACE_MS = 15 * 60 * 1000;

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

/** Files is the core's file service. */
export class Files {
  readonly uploads: Uploads;
  private readonly downloads: Signer;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly ctx: CoreContext,
    readonly store: BlobStore,
  ) {
    this.uploads = new Uploads(ctx, store);
    this.downloads = new Signer(ctx.secret, 'download');
  }

  /**
   * session gives the principal's file session: FTP, SFTP and WebDAV see the user's user_root as
   * `/`, the REST API and site-wide keys see the whole site (DESIGN.md "Login gate").
   */
  session(p: Principal): FileSession {
    const rooted = p.interface === 'ftp' || p.interface === 'sftp' || p.interface === 'dav';
    const root = rooted && p.user ? p.user.user_root.replace(/\/$/, '') : '';
    return new FileSession(this.ctx, this.store, p, root);
  }

  /** downloadUrl checks read permission, records the `read` Action and signs a URL valid 3 minutes. */
  async downloadUrl(session: FileSession, path: string): Promise<{ entry: Entry; url: string }> {
    const { entry, row } = await session.prepareDownload(path);
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

  /** openSigned opens the bytes behind a download token; blobs are immutable, so the token names them directly. */
  async openSigned(token: string, range?: ByteRange, signal?: AbortSignal): Promise<SignedDownload> {
    const d = this.describeSigned(token);
    try {
      const stream = await this.store.get(d.blobId, {
        ...(range ? { range } : {}),
        ...(signal ? { signal } : {}),
      });
      return { ...d, stream };
    } catch (err) {
      if ((err as { code?: string }).code === 'ENOENT')
        throw new GatewayError('not-found/file-not-found', 'This file no longer exists');
      throw err;
    }
  }

  /**
   * collectGarbage deletes blobs queued as garbage for longer than `graceMs` that no file, upload
   * or part refers to; two instances doing it at once only delete a blob twice, which is harmless.
   */
  async collectGarbage(graceMs = GARBAGE_GRACE_MS): Promise<number> {
    await this.uploads.expire();
    const due = await this.ctx.db.read((em) =>
      em.find(BlobGarbageEntity, { where: { since: LessThan(new Date(Date.now() - graceMs)) }, take: 500 }),
    );
    let deleted = 0;
    for (const g of due) {
      const unreferenced = await this.ctx.db.work(async (em) => {
        const used =
          (await em.existsBy(FileEntity, { blob_id: g.blob_id })) ||
          (await em.existsBy(UploadPartEntity, { blob_id: g.blob_id })) ||
          (await em.existsBy(UploadEntity, { restart_blob_id: g.blob_id }));
        await em.delete(BlobGarbageEntity, { blob_id: g.blob_id });
        return !used;
      });
      if (unreferenced) {
        await this.store.delete(g.blob_id);
        deleted++;
      }
    }
    return deleted;
  }

  /**
   * sweepStaging deletes the staged-upload temporary files a crash left behind (see
   * STALE_STAGING_MS); `olderThanMs` is for tests.
   */
  async sweepStaging(olderThanMs?: number): Promise<number> {
    const deleted = await sweepStaging(stagingDir(this.ctx.config.data_dir), olderThanMs);
    if (deleted) this.ctx.log.info('deleted stale staging files', { count: deleted });
    return deleted;
  }

  /**
   * startBackground sweeps stale staging files now, then runs garbage collection, upload expiry
   * and the sweep every minute until stop.
   */
  startBackground(): Promise<void> {
    if (this.timer) return Promise.resolve();
    const sweep = async () => {
      await this.sweepStaging().catch((err: unknown) => {
        this.ctx.log.warn('staging sweep failed', { error: String(err) });
      });
    };
    this.timer = setInterval(() => {
      this.collectGarbage().catch((err: unknown) =>
        this.ctx.log.warn('garbage collection failed', { error: String(err) }),
      );
      void sweep();
    }, 60_000);
    this.timer.unref();
    return sweep();
  }

  /** stop ends the background work and closes the blob store. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.store.close();
  }
}
