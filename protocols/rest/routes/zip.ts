/**
 * Our extension: GET /zip/<folder> streams the folder (or, with `entries[]=<name>`, some of its
 * entries) as one zip. The walk lists a page of 1,000 entries at a time and opens one file at a
 * time, each through the core (read permission, a `read` Action per file), and the archive is
 * written as the client takes it: never built whole in memory or on disk.
 */
import contentDisposition from 'content-disposition';
import ZipStream from 'zip-stream';
import { GatewayError, type Core, type Entry, type FileSession } from '../../../src/core/index.ts';
import { principal, query, type RestContext, type RestRouter } from '../http.ts';
import { urlPath } from '../paths.ts';

const PAGE = 1000;

const nameOf = (path: string) => path.slice(path.lastIndexOf('/') + 1);

/** walk yields every entry below `folder`, folders before their contents, a page at a time. */
async function* walk(session: FileSession, folder: string): AsyncGenerator<Entry> {
  for await (const page of session.listAll(folder, PAGE))
    for (const entry of page) {
      yield entry;
      if (entry.type === 'directory') yield* walk(session, entry.path);
    }
}

/** entriesParam reads `entries[]` (names inside the folder), or null for the whole folder. */
function entriesParam(q: Record<string, unknown>): string[] | null {
  const raw = q.entries;
  if (raw === undefined) return null;
  const list = Array.isArray(raw) ? raw : typeof raw === 'object' && raw ? Object.values(raw) : [raw];
  if (list.length === 0 || list.some((n) => typeof n !== 'string' || n === '' || n.includes('/')))
    throw new GatewayError('bad-request/request-params-invalid', 'entries[] takes names inside the folder');
  return [...new Set(list as string[])];
}

/** zipRoutes registers /zip. */
export function zipRoutes(router: RestRouter, core: Core): void {
  router.get('/zip{/*path}', async (ctx: RestContext) => {
    const session = core.files.session(principal(ctx));
    const folder = urlPath(ctx, '/zip').replace(/\/+$/, '');
    const names = entriesParam(query(ctx));
    // Refusals come before the first byte, while they can still be an error status.
    if (folder && (await session.stat(folder)).type !== 'directory')
      throw new GatewayError('bad-request/folder-must-not-be-a-file', `/${folder} is a file, not a folder`);
    await session.requireDownload(folder);
    const top = names && (await Promise.all(names.map((n) => session.stat(folder ? `${folder}/${n}` : n))));

    const abort = new AbortController();
    ctx.req.once('close', () => abort.abort());
    // Stored, not deflated: most large files are compressed already, and it keeps a 2-core
    // machine's CPU for the other transfers.
    const zip = new ZipStream({ store: true });
    const prefix = folder ? `${folder}/` : '';
    const add = (entry: Entry) =>
      new Promise<void>((resolve, reject) => {
        const name = entry.path.slice(prefix.length);
        const date = new Date(entry.mtime);
        if (entry.type === 'directory') {
          zip.entry(null, { name: `${name}/`, date }, (err) => (err ? reject(err) : resolve()));
          return;
        }
        session
          .openRead(entry.path, { signal: abort.signal })
          .then((opened) => {
            zip.entry(opened.stream, { name, date }, (err) => (err ? reject(err) : resolve()));
          })
          .catch(reject);
      });
    const selected = async function* (): AsyncGenerator<Entry> {
      if (!top) {
        yield* walk(session, folder);
        return;
      }
      for (const entry of top) {
        yield entry;
        if (entry.type === 'directory') yield* walk(session, entry.path);
      }
    };
    void (async () => {
      try {
        for await (const entry of selected()) {
          if (abort.signal.aborted) break;
          await add(entry);
        }
        zip.finish();
      } catch (err) {
        // The status is sent: a cut-off archive is how the client learns of a failure now.
        zip.destroy(err instanceof Error ? err : new Error(String(err)));
      }
    })();
    ctx.status = 200;
    ctx.type = 'application/zip';
    ctx.set('Content-Disposition', contentDisposition(`${folder ? nameOf(folder) : 'files'}.zip`));
    ctx.set('Cache-Control', 'no-store');
    ctx.body = zip;
  });
}
