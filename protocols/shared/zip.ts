/**
 * A zip streamed as the client takes it (the REST /zip route, a share link's "download all"):
 * folders are walked a page of 1,000 entries at a time and files opened one at a time, each
 * through the core (which checks and records each read); the archive is never built whole in
 * memory or on disk. Entries are stored, not deflated: most large files are compressed already,
 * and it keeps a 2-core machine's CPU for the other transfers.
 */
import type { Readable } from 'node:stream';
import type ZipStream from 'zip-stream';
import type { Entry } from '../../src/core/index.ts';

const PAGE = 1000;

/** ZipSource is what a zip reads: folder listings a page at a time and file contents, in the caller's paths. */
export interface ZipSource {
  listAll(folder: string, pageSize: number): AsyncIterable<Entry[]>;
  openRead(path: string, signal: AbortSignal): Promise<Readable>;
}

/** walk yields every entry below `folder`, folders before their contents, a page at a time. */
async function* walk(source: ZipSource, folder: string): AsyncGenerator<Entry> {
  for await (const page of source.listAll(folder, PAGE))
    for (const entry of page) {
      yield entry;
      if (entry.type === 'directory') yield* walk(source, entry.path);
    }
}

/**
 * streamZip starts writing a zip of `top` (each with everything inside it) or, when `top` is null,
 * of everything in `folder`; member names are the paths after `prefix`. A failure once bytes are
 * sent cuts the archive off, which is how the client learns of it then. Aborting `signal` (the
 * client went away) stops the walk.
 */
export async function streamZip(
  source: ZipSource,
  opts: { folder: string; top: Entry[] | null; prefix: string; signal: AbortSignal },
): Promise<ZipStream> {
  // Loaded with the first zip, not at start (2 MiB of heap with its archiver modules).
  const { default: ZipStreamClass } = await import('zip-stream');
  const zip = new ZipStreamClass({ store: true });
  const add = (entry: Entry) =>
    new Promise<void>((resolve, reject) => {
      const name = entry.path.slice(opts.prefix.length);
      const date = new Date(entry.mtime);
      if (entry.type === 'directory') {
        zip.entry(null, { name: `${name}/`, date }, (err) => (err ? reject(err) : resolve()));
        return;
      }
      source
        .openRead(entry.path, opts.signal)
        .then((stream) => {
          zip.entry(stream, { name, date }, (err) => (err ? reject(err) : resolve()));
        })
        .catch(reject);
    });
  const selected = async function* (): AsyncGenerator<Entry> {
    if (!opts.top) {
      yield* walk(source, opts.folder);
      return;
    }
    for (const entry of opts.top) {
      yield entry;
      if (entry.type === 'directory') yield* walk(source, entry.path);
    }
  };
  void (async () => {
    try {
      for await (const entry of selected()) {
        if (opts.signal.aborted) break;
        await add(entry);
      }
      zip.finish();
    } catch (err) {
      zip.destroy(err instanceof Error ? err : new Error(String(err)));
    }
  })();
  return zip;
}
