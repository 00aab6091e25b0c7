/**
 * WriteBehind starts the disk writes of a big file while its bytes arrive, for a store that syncs
 * every blob before the client hears success (durability `fsync`). Linux starts writing dirty
 * pages back only once a tenth of memory is dirty, so without it a 1 GiB upload waits whole in the
 * page cache and the client waits for all of it in the fsync at the end (0.4-0.8 s a GiB here):
 * with a sync every WRITE_BEHIND bytes, one at a time in the thread pool, that fsync finds little
 * left to write. A failed sync fails the upload: once a sync has seen a write error, a later fsync
 * of the file may not report it again.
 */

/** WRITE_BEHIND is how many bytes may wait in the page cache before a sync starts. */
export const WRITE_BEHIND = 32 * 1024 * 1024;

/**
 * MAX_SYNCING is how many of these syncs may run at once in the process: each holds one of the
 * thread pool's four threads while the disk writes, and reads for downloads, small uploads and
 * their syncs need the others. An upload that finds them taken syncs at its next chunk instead.
 */
export const MAX_SYNCING = 2;
let syncing = 0;

export class WriteBehind {
  private synced = 0;
  private inFlight: Promise<void> | null = null;
  private failure: unknown = null;

  /** `sync` makes the file's bytes written so far durable (fdatasync in the thread pool). */
  constructor(private readonly sync: () => Promise<void>) {}

  /** written tells how far the file is written; a sync starts when WRITE_BEHIND bytes wait. */
  written(upto: number): void {
    if (this.inFlight || this.failure !== null || upto - this.synced < WRITE_BEHIND) return;
    if (syncing >= MAX_SYNCING) return;
    syncing++;
    // A sync that throws at once counts as a failed one (and gives its place back).
    this.inFlight = new Promise<void>((resolve) => resolve(this.sync())).then(
      () => {
        syncing--;
        this.synced = upto;
        this.inFlight = null;
      },
      (err: unknown) => {
        syncing--;
        this.failure = err;
        this.inFlight = null;
      },
    );
  }

  /** settle waits for the sync in flight and rejects with the first sync's failure. */
  async settle(): Promise<void> {
    await this.inFlight;
    if (this.failure !== null) throw this.failure;
  }
}
