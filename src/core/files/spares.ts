/**
 * SpareFiles keeps a few empty files made ahead in subfolders of one folder, so that a file's
 * creation is not on the path of the request that needs it (issue 13, per-file cost). Creating an
 * inode is the dearest system call of a small upload on some disks: 0.2-1 ms on the ext4 of the
 * machines this was measured on when creations are not back to back (13 µs in a tight loop, 3 µs
 * on tmpfs), on the event loop for every file of an OpenSSH `put -r` or a WebDAV PUT. A spare is
 * made in the thread pool while the client is busy elsewhere (sending the file's bytes, waiting
 * for a reply), and taken at once by the next upload. Used by SFTP's staged writes and the local
 * blob store's small blobs.
 *
 * A spare is named by the namer the owner gives (with the process's OWNER, so the crash sweep
 * of the folder removes what a killed process left); taken, it keeps its name. Spares are closed
 * and removed at close. The first creation, and any when none is ready (many uploads at once),
 * happens on the spot, as before.
 */
import { close, closeSync, fstatSync, mkdir, mkdirSync, open, openSync, rm } from 'node:fs';
import path from 'node:path';

/** Spare is an empty file and its descriptor, opened for reading and writing. */
export interface Spare {
  file: string;
  fd: number;
}

/** SPARES is how many files are kept made ahead: a sequential client needs one, the rest absorb bursts. */
export const SPARES = 4;

/**
 * SLOTS is how many subfolders of the folder the spares are made in, in turn. A spare is renamed
 * out of its folder (into the blob store); a creation holds its folder's lock while the file
 * system finds an inode, and a rename out of that folder waits for it: with every spare in one
 * folder, renames spun on that lock for 15% of the event loop's time in 4 parallel WebDAV PUTs of
 * small files (perf). Taken in the order they became ready, a spare comes from a folder that the
 * creations under way (the next ones in turn) are not using.
 */
const SLOTS = 8;

/** SpareFiles makes empty files in `dir` ahead of need (see the file's comment). */
export class SpareFiles {
  private readonly ready: Spare[] = [];
  private readonly making = new Set<Promise<void>>();
  private closed = false;
  private slot = 0;

  constructor(
    readonly dir: string,
    /** a new unique file name in `dir` */
    private readonly name: () => string,
    private readonly keep = SPARES,
  ) {}

  /**
   * create gives an empty file opened for reading and writing: a spare when one is ready, else
   * one made now (its error, ENOENT for a folder gone, thrown as the open's). Either way the
   * spares are made up again in the thread pool.
   */
  create(): Spare {
    let spare: Spare | undefined;
    while ((spare = this.ready.shift())) {
      // A spare whose name is gone (an operator emptied the folder) could not be renamed or read
      // back by its name: it is dropped and the next one tried.
      if (fstatSync(spare.fd).nlink > 0) break;
      closeSync(spare.fd);
    }
    this.refill();
    if (spare) return spare;
    const [folder, file] = this.nextFile();
    try {
      return { file, fd: openSync(file, 'wx+', 0o600) };
    } catch (err) {
      // Its subfolder not made yet (or removed): made, then once more. Not `dir` itself: a
      // missing `dir` throws ENOENT here, for the owner's Folders to make (as openMaking does).
      if ((err as { code?: string }).code !== 'ENOENT') throw err;
      try {
        mkdirSync(folder);
      } catch (mkErr) {
        if ((mkErr as { code?: string }).code !== 'EEXIST') throw mkErr;
      }
      return { file, fd: openSync(file, 'wx+', 0o600) };
    }
  }

  /** nextFile names the next file and the subfolder it goes in (SLOTS). */
  private nextFile(): [string, string] {
    const folder = path.join(this.dir, String(this.slot));
    this.slot = (this.slot + 1) % SLOTS;
    return [folder, path.join(folder, this.name())];
  }

  /** count is how many spares are ready (for tests). */
  get count(): number {
    return this.ready.length;
  }

  private refill(): void {
    while (!this.closed && this.ready.length + this.making.size < this.keep) {
      const [folder, file] = this.nextFile();
      // A failure (the folder removed, a full disk) makes no spare: the next create makes its
      // file on the spot and reports the error there, to the upload that needs it. A subfolder
      // not made yet is made (only inside `dir`, which the owner makes).
      const made = new Promise<void>((resolve) =>
        openMaking(folder, file, (err, fd) => {
          this.making.delete(made);
          if (err) return resolve();
          if (!this.closed) {
            this.ready.push({ file, fd });
            return resolve();
          }
          close(fd, () => rm(file, { force: true }, () => resolve()));
        }),
      );
      this.making.add(made);
    }
  }

  /** close stops making spares and removes those not taken, once the ones being made are done. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.making);
    for (const spare of this.ready.splice(0)) {
      closeSync(spare.fd);
      await new Promise<void>((resolve) => rm(spare.file, { force: true }, () => resolve()));
    }
  }
}

/** openMaking creates `file` in the thread pool, making its `folder` (not its parent) first if it is missing. */
function openMaking(folder: string, file: string, done: (err: Error | null, fd: number) => void): void {
  open(file, 'wx+', 0o600, (err, fd) => {
    if (err?.code !== 'ENOENT') return done(err, fd);
    mkdir(folder, (mkErr) => {
      if (mkErr && mkErr.code !== 'EEXIST') return done(mkErr, -1);
      open(file, 'wx+', 0o600, done);
    });
  });
}
