/**
 * Folders makes the folders files are created in once per process and remembers them, so that
 * creating a file costs no mkdir (each is a trip through the thread pool, issue 13). A folder
 * removed behind the process's back (an operator's cleanup) fails the creation with ENOENT:
 * `within` then makes it again and creates once more.
 */
import { mkdir } from 'node:fs/promises';

export class Folders {
  private readonly made = new Set<string>();

  /** make makes `dir` (and its parents) unless this process made it already; `again` makes it anyway. */
  async make(dir: string, again = false): Promise<void> {
    if (!again && this.made.has(dir)) return;
    await mkdir(dir, { recursive: true });
    this.made.add(dir);
  }

  /** within runs `create` (a file's creation in `dir`) after make, and once more if the folder had gone. */
  async within<T>(dir: string, create: () => T | Promise<T>): Promise<T> {
    await this.make(dir);
    try {
      return await create();
    } catch (err) {
      if ((err as { code?: string }).code !== 'ENOENT') throw err;
      await this.make(dir, true);
      return await create();
    }
  }
}
