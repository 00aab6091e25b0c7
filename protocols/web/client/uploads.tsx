/**
 * The page's uploads: a queue (two files at a time, folders created first) and its panel, with a
 * progress bar per file and one for the total. Progress lives in this module, not in the file
 * browser's state, and the panel redraws at most ten times a second: a listing of 10,000 rows is
 * not re-rendered for every progress event, and the CPU stays with the network.
 */
import { useEffect, useState } from 'preact/hooks';
import { API, ApiError, encodePath, request } from './api.ts';
import type { Chosen } from './dropped.ts';
import { formatSize, join } from './paths.ts';
import { forgetPath, interruptedIn } from './resume.ts';
import { uploadFile } from './upload.ts';

interface UploadState {
  id: number;
  /** the site path it goes to */
  path: string;
  /** as shown: the path below the folder it was dropped into */
  name: string;
  size: number;
  sent: number;
  resumed: number;
  status: 'waiting' | 'sending' | 'done' | 'failed';
  error?: string;
}

let uploads: UploadState[] = [];
let nextId = 0;
const listeners = new Set<() => void>();
let scheduled = false;
const notify = (now = false) => {
  if (now) {
    scheduled = false;
    for (const l of listeners) l();
    return;
  }
  if (scheduled) return;
  scheduled = true;
  setTimeout(() => scheduled && notify(true), 100);
};
const update = (id: number, patch: Partial<UploadState>, now = true) => {
  uploads = uploads.map((u) => (u.id === id ? { ...u, ...patch } : u));
  notify(now);
};

const message = (err: unknown) => (err instanceof ApiError ? err.message : String(err));

/**
 * runUploads creates `chosen`'s folders under `target`, then sends its files, two at a time.
 * It resolves when every file is done or failed, with the number that failed.
 */
export async function runUploads(target: string, chosen: Chosen): Promise<number> {
  const batch = chosen.files.map(({ file, path }) => ({
    file,
    state: {
      id: ++nextId,
      path: join(target, path),
      name: path,
      size: file.size,
      sent: 0,
      resumed: 0,
      status: 'waiting',
    } as UploadState,
  }));
  uploads = [
    ...uploads.filter((u) => u.status === 'sending' || u.status === 'waiting'),
    ...batch.map((b) => b.state),
  ];
  notify(true);
  for (const folder of chosen.folders) {
    try {
      await request('POST', `${API}/folders/${encodePath(join(target, folder))}`);
    } catch (err) {
      // Already there: the upload adds to it. Anything else fails the files inside.
      if (!(err instanceof ApiError && err.type === 'processing-failure/destination-exists')) {
        for (const b of batch)
          if (b.state.name.startsWith(`${folder}/`))
            update(b.state.id, { status: 'failed', error: message(err) });
      }
    }
  }
  const controller = new AbortController();
  // Two files at a time: enough to fill the line, few enough that each shows steady progress.
  const queue = batch.filter((b) => uploads.find((u) => u.id === b.state.id)?.status === 'waiting');
  let failed = batch.length - queue.length;
  const worker = async () => {
    for (let b = queue.shift(); b; b = queue.shift()) {
      const id = b.state.id;
      update(id, { status: 'sending' });
      try {
        await uploadFile(b.state.path, b.file, (p) => update(id, p, false), controller.signal);
        update(id, { status: 'done', sent: b.file.size });
      } catch (err) {
        failed++;
        update(id, { status: 'failed', error: message(err) });
      }
    }
  };
  await Promise.all([worker(), worker()]);
  return failed;
}

function percent(u: UploadState): string {
  const resumed = u.resumed > 0 ? ` (resumed at ${formatSize(u.resumed)})` : '';
  if (u.status === 'done') return `Done${resumed}`;
  if (u.status === 'failed') return `Failed: ${u.error}`;
  if (u.status === 'waiting') return 'Waiting';
  const pct = `${Math.floor((100 * u.sent) / (u.size || 1))}%`;
  return `${pct}${resumed}`;
}

/** UploadPanel shows the uploads, and uploads into `folder` that a reload or a failure cut short. */
export function UploadPanel(props: { folder: string }) {
  const [, redraw] = useState(0);
  useEffect(() => {
    const l = () => redraw((n) => n + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  const active = new Set(uploads.filter((u) => u.status !== 'failed').map((u) => u.path));
  const cut = interruptedIn(props.folder).filter((i) => !active.has(i.path));
  if (uploads.length === 0 && cut.length === 0) return null;
  const totalSize = uploads.reduce((s, u) => s + u.size, 0);
  const totalSent = uploads.reduce((s, u) => s + (u.status === 'done' ? u.size : u.sent), 0);
  const inFolder = (p: string) => (props.folder ? p.slice(props.folder.length + 1) : p);
  return (
    <section class="uploads" aria-label="Uploads">
      {cut.length > 0 && (
        <div class="notice interrupted">
          <p>
            {cut.length === 1 ? 'An upload was interrupted' : `${cut.length} uploads were interrupted`}.
            Choose the same {cut.length === 1 ? 'file' : 'files'} with Upload to resume where{' '}
            {cut.length === 1 ? 'it' : 'they'} stopped:
          </p>
          <ul>
            {cut.map((i) => (
              <li key={i.path}>
                {inFolder(i.path)}: {formatSize(i.sent)} of {formatSize(i.size)} sent{' '}
                <button
                  type="button"
                  class="link"
                  aria-label={`Forget the upload of ${inFolder(i.path)}`}
                  onClick={() => {
                    forgetPath(i.path);
                    redraw((n) => n + 1);
                  }}
                >
                  Forget
                </button>
              </li>
            ))}
          </ul>
        </div>
      )}
      {uploads.length > 0 && (
        <div class="upload total">
          <span class="name">Total</span>
          <progress aria-label="Total upload" max={totalSize || 1} value={totalSent} />
          <span>
            {formatSize(totalSent)} of {formatSize(totalSize)}
          </span>
        </div>
      )}
      {uploads.map((u) => (
        <div class="upload" key={u.id}>
          <span class="name" title={u.name}>
            {u.name}
          </span>
          <progress
            aria-label={`Upload of ${u.name}`}
            max={u.size || 1}
            value={u.status === 'done' ? u.size || 1 : u.sent}
          />
          <span class={u.status === 'failed' ? 'error' : ''}>{percent(u)}</span>
        </div>
      ))}
    </section>
  );
}
