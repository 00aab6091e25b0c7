/**
 * The file browser: breadcrumbs, a listing sorted by the server and loaded page by page, drawn
 * virtually (only the rows in view exist in the DOM, so 10,000 entries scroll like 10), and the
 * actions the user's rights in this folder allow (the X-Svc-Rights header of the listing).
 */
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { API, ApiError, encodePath, request, sameOrigin, type Entry } from './api.ts';
import { Dialog, FolderPicker, NameDialog } from './dialogs.tsx';
import { dateFormat, folderFromHash, formatSize, join, nameOf, parentOf } from './paths.ts';
import { ShareDialog } from './share.tsx';
import { Activity } from './activity.tsx';
import { fromDrop, fromPicker, type Chosen } from './dropped.ts';
import { Preview } from './preview.tsx';
import { setOwner } from './resume.ts';
import { runUploads, UploadPanel } from './uploads.tsx';

const ROW_HEIGHT = 40;
const OVERSCAN = 10;
const PAGE_SIZE = 1000;

type SortKey = 'path' | 'size' | 'modified_at_datetime';
interface Sort {
  key: SortKey;
  dir: 'asc' | 'desc';
}

type Modal =
  | { kind: 'new-folder' }
  | { kind: 'rename'; entry: Entry }
  | { kind: 'move' | 'copy'; entries: Entry[] }
  | { kind: 'delete'; entries: Entry[] }
  | { kind: 'share'; entries: Entry[] }
  | { kind: 'preview'; entry: Entry }
  | { kind: 'activity' }
  | null;

/** rightsOf reads X-Svc-Rights: what the caller may do in the folder listed (or refused). */
const rightsOf = (headers: Headers | undefined) =>
  new Set(
    (headers?.get('X-Svc-Rights') ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );

export function Browser(props: { home: string; userId: number; email: string; canShare?: boolean }) {
  const home = props.home.replace(/^\/+|\/+$/g, '');
  setOwner(props.userId);
  const [folder, setFolder] = useState(() => folderFromHash(home));
  const [entries, setEntries] = useState<Entry[]>([]);
  const [complete, setComplete] = useState(false);
  const [rights, setRights] = useState<Set<string>>(new Set());
  const [sort, setSort] = useState<Sort>({ key: 'path', dir: 'asc' });
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [error, setError] = useState('');
  const [status, setStatus] = useState('');
  const [modal, setModal] = useState<Modal>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const [viewport, setViewport] = useState(600);
  const [dragging, setDragging] = useState(false);
  const listRef = useRef<HTMLDivElement>(null);
  const fileInput = useRef<HTMLInputElement>(null);
  const folderInput = useRef<HTMLInputElement>(null);
  const loadToken = useRef(0);

  const fail = (err: unknown) => setError(err instanceof ApiError ? err.message : String(err));

  const load = useCallback(async () => {
    const token = ++loadToken.current;
    setComplete(false);
    setError('');
    const all: Entry[] = [];
    try {
      for (let page = 1; ; page++) {
        const url =
          `${API}/folders/${encodePath(folder)}?per_page=${PAGE_SIZE}&page=${page}` +
          `&sort_by[${sort.key}]=${sort.dir}`;
        const { data, headers } = await request<Entry[]>('GET', url);
        if (token !== loadToken.current) return;
        if (page === 1) setRights(rightsOf(headers));
        all.push(...data);
        // Show the first page at once; later pages extend the list while the user already scrolls.
        setEntries(all.slice());
        if (data.length < PAGE_SIZE) break;
      }
      setComplete(true);
    } catch (err) {
      if (token !== loadToken.current) return;
      if (all.length === 0) {
        setEntries([]);
        // A folder one may not list may still take uploads (writeonly): the refusal names the rights.
        const r = rightsOf(err instanceof ApiError ? err.headers : undefined);
        setRights(r);
        if (r.has('write') && !r.has('list')) return; // said by the drop-box notice below
      }
      fail(err);
    }
  }, [folder, sort]);

  useEffect(() => {
    setSelected(new Set());
    setScrollTop(0);
    if (listRef.current) listRef.current.scrollTop = 0;
    void load();
  }, [load]);

  useEffect(() => {
    const onHash = () => setFolder(folderFromHash(home));
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);

  useEffect(() => {
    const el = listRef.current;
    if (!el) return;
    const observer = new ResizeObserver(() => setViewport(el.clientHeight));
    observer.observe(el);
    return () => observer.disconnect();
  }, []);

  const open = (path: string) => {
    location.hash = `#/${encodePath(path)}`;
  };

  const can = (r: string) => rights.has(r);
  const dropBox = can('write') && !can('list');
  const chosen = useMemo(() => entries.filter((e) => selected.has(e.path)), [entries, selected]);
  const single = chosen.length === 1 ? chosen[0]! : null;

  const toggle = (path: string) => {
    const next = new Set(selected);
    if (next.has(path)) next.delete(path);
    else next.add(path);
    setSelected(next);
  };

  const sortBy = (key: SortKey) =>
    setSort((s) => ({ key, dir: s.key === key && s.dir === 'asc' ? 'desc' : 'asc' }));

  /** save hands a URL of our own origin to the browser's downloads. */
  const save = (href: string, name: string) => {
    const a = document.createElement('a');
    a.href = href;
    a.download = name;
    document.body.append(a);
    a.click();
    a.remove();
  };

  /** download saves one file as itself, and folders or several items as one zip the server streams. */
  const download = async (list: Entry[]) => {
    setError('');
    const only = list.length === 1 ? list[0]! : null;
    if (only?.type === 'file') {
      try {
        const { data } = await request<Entry & { download_uri: string }>(
          'GET',
          `${API}/files/${encodePath(only.path)}`,
        );
        save(sameOrigin(data.download_uri), nameOf(only.path));
      } catch (err) {
        fail(err);
      }
      return;
    }
    const whole = only ? only.path : folder;
    const query = only
      ? ''
      : `?${list.map((e) => `entries[]=${encodeURIComponent(nameOf(e.path))}`).join('&')}`;
    save(`${API}/zip/${encodePath(whole)}${query}`, `${nameOf(whole) || 'files'}.zip`);
  };

  const createFolder = async (name: string) => {
    try {
      await request('POST', `${API}/folders/${encodePath(join(folder, name))}`);
      setStatus(`Folder ${name} created.`);
      await load();
    } catch (err) {
      fail(err);
    }
  };

  /** relocate moves or copies each entry into `target`, keeping its name. */
  const relocate = async (kind: 'move' | 'copy', list: Entry[], target: string) => {
    try {
      for (const entry of list) {
        await request('POST', `${API}/files/${encodePath(entry.path)}`, {
          body: { [`${kind}-destination`]: join(target, nameOf(entry.path)) },
        });
      }
      const what = list.length === 1 ? nameOf(list[0]!.path) : `${list.length} items`;
      setStatus(`${what} ${kind === 'move' ? 'moved' : 'copied'} to /${target}.`);
      setSelected(new Set());
    } catch (err) {
      fail(err);
    }
    await load();
  };

  /** subfolders lists a folder's folders for the picker (its first 1,000 entries). */
  const subfolders = async (path: string) => {
    const { data } = await request<Entry[]>('GET', `${API}/folders/${encodePath(path)}?per_page=1000`);
    return data.filter((e) => e.type === 'directory').map((e) => e.path);
  };

  const rename = async (entry: Entry, name: string) => {
    try {
      await request('POST', `${API}/files/${encodePath(entry.path)}`, {
        body: { 'move-destination': join(parentOf(entry.path), name) },
      });
      setStatus(`${nameOf(entry.path)} renamed to ${name}.`);
      setSelected(new Set());
      await load();
    } catch (err) {
      fail(err);
    }
  };

  const remove = async (list: Entry[]) => {
    try {
      for (const entry of list) {
        await request('DELETE', `${API}/files/${encodePath(entry.path)}`, {
          headers: entry.type === 'directory' ? { Depth: 'infinity' } : {},
        });
      }
      setStatus(list.length === 1 ? `${nameOf(list[0]!.path)} deleted.` : `${list.length} items deleted.`);
      setSelected(new Set());
      await load();
    } catch (err) {
      fail(err);
      await load();
    }
  };

  const startUploads = async (chosen: Chosen) => {
    if (chosen.files.length === 0 && chosen.folders.length === 0) return;
    setError('');
    setStatus('');
    const target = folder;
    const failed = await runUploads(target, chosen);
    setStatus(failed ? `Upload finished; ${failed} of ${chosen.files.length} failed.` : `Upload finished.`);
    if (target === folder) await load();
  };

  // What can be done with the selection, offered only where the folder's rights allow it.
  const moveRights = can('write') && can('delete');
  const some = chosen.length > 0;
  const selectionActions = [
    {
      label: 'Preview',
      offered: can('read'),
      enabled: single?.type === 'file',
      run: () => single && setModal({ kind: 'preview', entry: single }),
    },
    { label: 'Download', offered: can('read'), enabled: some, run: () => void download(chosen) },
    {
      label: 'Rename',
      offered: moveRights,
      enabled: single !== null,
      run: () => single && setModal({ kind: 'rename', entry: single }),
    },
    {
      label: 'Move',
      offered: moveRights,
      enabled: some,
      run: () => setModal({ kind: 'move', entries: chosen }),
    },
    {
      label: 'Copy',
      offered: can('read'),
      enabled: some,
      run: () => setModal({ kind: 'copy', entries: chosen }),
    },
    {
      label: 'Share',
      offered: Boolean(props.canShare) && (can('list') || can('write')),
      enabled: some,
      run: () => setModal({ kind: 'share', entries: chosen }),
    },
    {
      label: 'Delete',
      offered: can('delete'),
      enabled: some,
      run: () => setModal({ kind: 'delete', entries: chosen }),
    },
  ];

  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    setDragging(false);
    if (!can('write')) {
      setError('You may not upload into this folder.');
      return;
    }
    void fromDrop(e.dataTransfer).then(startUploads, fail);
  };

  // Breadcrumbs start at Home (the user's root); a folder outside it shows its whole path.
  const base = home && (folder === home || folder.startsWith(`${home}/`)) ? home : '';
  const segments = (base ? folder.slice(base.length) : folder).split('/').filter(Boolean);
  const first = Math.max(0, Math.floor(scrollTop / ROW_HEIGHT) - OVERSCAN);
  const last = Math.min(entries.length, Math.ceil((scrollTop + viewport) / ROW_HEIGHT) + OVERSCAN);
  const arrow = (key: SortKey) => (sort.key === key ? (sort.dir === 'asc' ? ' ▲' : ' ▼') : '');
  const ariaSort = (key: SortKey) =>
    sort.key === key ? (sort.dir === 'asc' ? 'ascending' : 'descending') : 'none';

  return (
    <main
      class={dragging ? 'browser dragging' : 'browser'}
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={onDrop}
    >
      <nav aria-label="Breadcrumbs" class="crumbs">
        <ol>
          <li>
            <button
              type="button"
              class="link"
              onClick={() => open(home)}
              aria-current={folder === home ? 'page' : undefined}
            >
              Home
            </button>
          </li>
          {segments.map((s, i) => (
            <li key={i}>
              <button
                type="button"
                class="link"
                onClick={() => open([base, ...segments.slice(0, i + 1)].filter(Boolean).join('/'))}
                aria-current={i === segments.length - 1 ? 'page' : undefined}
              >
                {s}
              </button>
            </li>
          ))}
        </ol>
      </nav>

      <div class="toolbar" role="toolbar" aria-label="Actions">
        {can('write') && (
          <>
            <button type="button" onClick={() => fileInput.current?.click()}>
              Upload
            </button>
            <input
              ref={fileInput}
              type="file"
              multiple
              hidden
              aria-label="Files to upload"
              onChange={(e) => {
                const chosen = fromPicker(e.currentTarget.files);
                e.currentTarget.value = '';
                void startUploads(chosen);
              }}
            />
            <button type="button" onClick={() => folderInput.current?.click()}>
              Upload folder
            </button>
            <input
              ref={folderInput}
              type="file"
              hidden
              {...{ webkitdirectory: true }}
              aria-label="Folder to upload"
              onChange={(e) => {
                const chosen = fromPicker(e.currentTarget.files);
                e.currentTarget.value = '';
                void startUploads(chosen);
              }}
            />
            <button type="button" onClick={() => setModal({ kind: 'new-folder' })}>
              New folder
            </button>
          </>
        )}
        {selectionActions
          .filter((a) => a.offered)
          .map((a) => (
            <button key={a.label} type="button" disabled={!a.enabled} onClick={a.run}>
              {a.label}
            </button>
          ))}
        <button type="button" onClick={() => setModal({ kind: 'activity' })}>
          Activity
        </button>
      </div>

      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <p class="status" role="status">
        {status}
      </p>

      <UploadPanel folder={folder} />

      <div class="listing" role="table" aria-label="Folder contents" aria-rowcount={entries.length + 1}>
        <div class="row head" role="row" aria-rowindex={1}>
          <span role="columnheader" class="check" />
          <span role="columnheader" class="name" aria-sort={ariaSort('path')}>
            <button type="button" class="link" onClick={() => sortBy('path')}>
              Name{arrow('path')}
            </button>
          </span>
          <span role="columnheader" class="size" aria-sort={ariaSort('size')}>
            <button type="button" class="link" onClick={() => sortBy('size')}>
              Size{arrow('size')}
            </button>
          </span>
          <span role="columnheader" class="mtime" aria-sort={ariaSort('modified_at_datetime')}>
            <button type="button" class="link" onClick={() => sortBy('modified_at_datetime')}>
              Modified{arrow('modified_at_datetime')}
            </button>
          </span>
        </div>
        <div class="rows" ref={listRef} onScroll={(e) => setScrollTop(e.currentTarget.scrollTop)}>
          <div role="rowgroup" style={{ height: `${entries.length * ROW_HEIGHT}px`, position: 'relative' }}>
            {entries.slice(first, last).map((entry, i) => {
              const name = nameOf(entry.path);
              const index = first + i;
              return (
                <div
                  key={entry.path}
                  role="row"
                  aria-rowindex={index + 2}
                  class={selected.has(entry.path) ? 'row selected' : 'row'}
                  style={{ transform: `translateY(${index * ROW_HEIGHT}px)` }}
                >
                  <span role="cell" class="check">
                    <input
                      type="checkbox"
                      aria-label={`Select ${name}`}
                      checked={selected.has(entry.path)}
                      onChange={() => toggle(entry.path)}
                    />
                  </span>
                  <span role="cell" class="name">
                    {entry.type === 'directory' ? (
                      <button type="button" class="link folder" onClick={() => open(entry.path)}>
                        {name}
                      </button>
                    ) : // A file opens in the preview where the user may read it, as a folder opens.
                    can('read') ? (
                      <button
                        type="button"
                        class="link file"
                        onClick={() => setModal({ kind: 'preview', entry })}
                      >
                        {name}
                      </button>
                    ) : (
                      <span class="file" onClick={() => toggle(entry.path)}>
                        {name}
                      </span>
                    )}
                  </span>
                  <span role="cell" class="size">
                    {entry.type === 'directory' ? 'Folder' : formatSize(entry.size)}
                  </span>
                  <span role="cell" class="mtime">
                    {entry.mtime ? dateFormat.format(new Date(entry.mtime)) : ''}
                  </span>
                </div>
              );
            })}
          </div>
          {complete && entries.length === 0 && !error && <p class="empty">This folder is empty.</p>}
        </div>
      </div>
      {dropBox ? (
        <p class="notice">You may upload into this folder, but not see what is in it.</p>
      ) : (
        <p class="count" aria-live="polite">
          {entries.length} {entries.length === 1 ? 'item' : 'items'}
          {complete || error ? '' : ' so far…'}
        </p>
      )}
      {can('write') && <p class="hint">Drop files here to upload them into this folder.</p>}

      {modal?.kind === 'new-folder' && (
        <NameDialog
          title="New folder"
          label="Folder name"
          submit="Create folder"
          initial=""
          onDone={(name) => {
            setModal(null);
            if (name) void createFolder(name);
          }}
        />
      )}
      {(modal?.kind === 'move' || modal?.kind === 'copy') && (
        <FolderPicker
          title={`${modal.kind === 'move' ? 'Move' : 'Copy'} ${
            modal.entries.length === 1 ? nameOf(modal.entries[0]!.path) : `${modal.entries.length} items`
          }`}
          submit={modal.kind === 'move' ? 'Move here' : 'Copy here'}
          start={folder}
          list={subfolders}
          onDone={(target) => {
            const { kind, entries: list } = modal;
            setModal(null);
            if (target !== null) void relocate(kind, list, target);
          }}
        />
      )}
      {modal?.kind === 'rename' && (
        <NameDialog
          title={`Rename ${nameOf(modal.entry.path)}`}
          label="New name"
          submit="Save name"
          initial={nameOf(modal.entry.path)}
          onDone={(name) => {
            const entry = modal.entry;
            setModal(null);
            if (name && name !== nameOf(entry.path)) void rename(entry, name);
          }}
        />
      )}
      {modal?.kind === 'share' && (
        <ShareDialog
          paths={modal.entries.map((e) => e.path)}
          uploadable={can('write') && modal.entries.length === 1 && modal.entries[0]!.type === 'directory'}
          onClose={() => setModal(null)}
        />
      )}
      {modal?.kind === 'preview' && (
        <Preview
          entry={modal.entry}
          onDownload={() => void download([modal.entry])}
          onClose={() => setModal(null)}
        />
      )}
      {modal?.kind === 'activity' && (
        <Activity folder={folder} userId={props.userId} email={props.email} onClose={() => setModal(null)} />
      )}
      {modal?.kind === 'delete' && (
        <Dialog title="Delete" onClose={() => setModal(null)}>
          <p>
            {modal.entries.length === 1
              ? `Delete ${nameOf(modal.entries[0]!.path)}${modal.entries[0]!.type === 'directory' ? ' and everything in it' : ''}?`
              : `Delete these ${modal.entries.length} items?`}{' '}
            This cannot be undone.
          </p>
          <div class="buttons">
            <button
              type="button"
              class="danger"
              onClick={() => {
                const list = modal.entries;
                setModal(null);
                void remove(list);
              }}
            >
              Delete
            </button>
            <button type="button" onClick={() => setModal(null)}>
              Cancel
            </button>
          </div>
        </Dialog>
      )}
    </main>
  );
}
