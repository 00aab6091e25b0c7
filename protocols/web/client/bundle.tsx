/**
 * The recipient's page of a share link (/s/<code>), without an account: the password first when
 * the link has one (sent in a request body, never in the URL; the server then sets a cookie for
 * this link only), then what the link's kind allows: browse and download (one file, or all as a
 * zip the server streams), browse only (preview), or upload into the shared folder with progress.
 */
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, encodePath, request, type Entry } from './api.ts';
import { Field } from './field.tsx';
import { Preview } from './preview.tsx';
import { dateFormat, formatSize, nameOf } from './paths.ts';
import './share.css';

interface Summary {
  kind: 'download' | 'preview' | 'upload';
  description: string;
  expires_at: string | null;
  uses_left: number | null;
  entries: Entry[];
}

interface Sent {
  id: number;
  name: string;
  size: number;
  sent: number;
  status: 'sending' | 'done' | 'failed';
  error?: string;
}

const PAGE = 1000;

function Password(props: { base: string; onOpen: () => void }) {
  const [password, setPassword] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      await request('POST', `${props.base}/password`, { body: { password } });
      props.onOpen();
    } catch (err) {
      setError(err instanceof ApiError ? err.message : 'The password could not be checked.');
      setPassword('');
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <h1>Shared files</h1>
      <p class="notice">This link is protected. Enter the password you were given.</p>
      <form onSubmit={submit}>
        <Field
          label="Password"
          name="password"
          type="password"
          autocomplete="off"
          required
          value={password}
          onValue={setPassword}
        />
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          Open
        </button>
      </form>
    </main>
  );
}

/** send uploads one file as the body of a PUT, reporting progress (fetch reports none). */
function send(url: string, file: File, progress: (sent: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', url);
    xhr.setRequestHeader('X-Requested-With', 'svc-web');
    xhr.upload.onprogress = (e) => progress(e.loaded);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) return resolve();
      let message = 'The server refused the file.';
      try {
        const b = JSON.parse(xhr.responseText) as { error?: string };
        if (b.error) message = b.error;
      } catch {
        // keep the general sentence
      }
      reject(new Error(message));
    };
    xhr.onerror = () => reject(new Error('The connection dropped while sending.'));
    xhr.send(file);
  });
}

function UploadBox(props: { base: string; folder: string; onUsed: () => void }) {
  const [sent, setSent] = useState<Sent[]>([]);
  const [dragging, setDragging] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const next = useRef(0);
  const update = (id: number, patch: Partial<Sent>) =>
    setSent((list) => list.map((s) => (s.id === id ? { ...s, ...patch } : s)));
  const start = async (files: File[]) => {
    const batch = files.map((f) => ({
      file: f,
      state: { id: ++next.current, name: f.name, size: f.size, sent: 0, status: 'sending' } as Sent,
    }));
    setSent((list) => [...list, ...batch.map((b) => b.state)]);
    // One file at a time: each shows steady progress, and a used-up link stops at the first refusal.
    for (const b of batch) {
      try {
        await send(`${props.base}/files/${encodeURIComponent(b.file.name)}`, b.file, (n) =>
          update(b.state.id, { sent: n }),
        );
        update(b.state.id, { status: 'done', sent: b.file.size });
      } catch (err) {
        update(b.state.id, { status: 'failed', error: err instanceof Error ? err.message : String(err) });
      }
    }
    props.onUsed();
  };
  return (
    <section
      class={dragging ? 'dropzone dragging' : 'dropzone'}
      aria-label="Upload"
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        e.preventDefault();
        setDragging(false);
        void start([...(e.dataTransfer?.files ?? [])]);
      }}
    >
      <p>
        Send files into <strong>{props.folder}</strong>. You will not see what others sent, and a file is
        never replaced: pick another name if one is already there.
      </p>
      <button type="button" onClick={() => input.current?.click()}>
        Upload
      </button>
      <input
        ref={input}
        type="file"
        multiple
        hidden
        aria-label="Files to upload"
        onChange={(e) => {
          const files = [...(e.currentTarget.files ?? [])];
          e.currentTarget.value = '';
          void start(files);
        }}
      />
      <p class="hint">Or drop files here.</p>
      {sent.length > 0 && (
        <ul class="sent" aria-label="Files sent">
          {sent.map((s) => (
            <li key={s.id} class="upload">
              <span class="name">{s.name}</span>
              <progress
                aria-label={`Upload of ${s.name}`}
                max={s.size || 1}
                value={s.status === 'done' ? s.size || 1 : s.sent}
              />
              <span class={s.status === 'failed' ? 'error' : ''}>
                {s.status === 'done'
                  ? 'Sent'
                  : s.status === 'failed'
                    ? `Failed: ${s.error}`
                    : `${Math.floor((100 * s.sent) / (s.size || 1))}%`}
              </span>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/** BundlePage is the whole page of one share link. */
export function BundlePage(props: { code: string }) {
  const base = `/s/${encodeURIComponent(props.code)}`;
  const [summary, setSummary] = useState<Summary | null>(null);
  const [locked, setLocked] = useState(false);
  const [fatal, setFatal] = useState('');
  const [error, setError] = useState('');
  const [folder, setFolder] = useState('');
  const [entries, setEntries] = useState<Entry[]>([]);
  const [preview, setPreview] = useState<Entry | null>(null);

  const open = useCallback(async () => {
    setFatal('');
    try {
      const { data } = await request<Summary>('GET', `${base}/info`);
      setLocked(false);
      setSummary(data);
      setEntries(data.entries);
      setFolder('');
    } catch (err) {
      if (err instanceof ApiError && err.type === 'not-authenticated/authentication-required')
        setLocked(true);
      else setFatal(err instanceof ApiError ? err.message : String(err));
    }
  }, [base]);

  useEffect(() => {
    void open();
  }, [open]);

  const browse = async (path: string) => {
    setError('');
    if (path === '') {
      setFolder('');
      setEntries(summary?.entries ?? []);
      return;
    }
    try {
      const all: Entry[] = [];
      for (let page = 1; ; page++) {
        const { data } = await request<Entry[]>(
          'GET',
          `${base}/list/${encodePath(path)}?per_page=${PAGE}&page=${page}`,
        );
        all.push(...data);
        if (data.length < PAGE) break;
      }
      setFolder(path);
      setEntries(all);
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    }
  };

  if (locked) return <Password base={base} onOpen={() => void open()} />;
  if (fatal)
    return (
      <main class="signin bundle-problem">
        <h1>This link does not work</h1>
        <p class="error" role="alert">
          {fatal}
        </p>
        <p class="hint">Ask the person who shared it for a new link.</p>
      </main>
    );
  if (!summary) return <p class="loading">Loading…</p>;

  const downloads = summary.kind === 'download';
  const segments = folder.split('/').filter(Boolean);
  return (
    <div class="shell">
      <header class="top">
        <strong class="brand">svc-gateway</strong>
        <span class="who">Shared files</span>
      </header>
      <main class="browser bundle">
        <h1>
          {summary.kind === 'upload'
            ? 'Send files'
            : summary.kind === 'preview'
              ? 'Files shared for viewing'
              : 'Files shared with you'}
        </h1>
        {summary.description && <p class="description">{summary.description}</p>}
        <p class="hint">
          {summary.expires_at
            ? `This link works until ${dateFormat.format(new Date(summary.expires_at))}. `
            : ''}
          {summary.uses_left !== null
            ? `${summary.uses_left} ${summary.uses_left === 1 ? 'use' : 'uses'} left.`
            : ''}
        </p>
        {summary.kind === 'upload' ? (
          <UploadBox base={base} folder={nameOf(summary.entries[0]?.path ?? '')} onUsed={() => undefined} />
        ) : (
          <>
            {summary.kind === 'preview' && (
              <p class="notice">
                This link lets you view the files here, not download them. Choose a name to view it.
              </p>
            )}
            <nav aria-label="Breadcrumbs" class="crumbs">
              <ol>
                <li>
                  <button
                    type="button"
                    class="link"
                    onClick={() => void browse('')}
                    aria-current={folder === '' ? 'page' : undefined}
                  >
                    All shared items
                  </button>
                </li>
                {segments.map((s, i) => (
                  <li key={i}>
                    <button
                      type="button"
                      class="link"
                      onClick={() => void browse(segments.slice(0, i + 1).join('/'))}
                      aria-current={i === segments.length - 1 ? 'page' : undefined}
                    >
                      {s}
                    </button>
                  </li>
                ))}
              </ol>
            </nav>
            {downloads && (
              <div class="toolbar" role="toolbar" aria-label="Actions">
                <a class="button" href={`${base}/zip`} download>
                  Download all
                </a>
              </div>
            )}
            {error && (
              <p class="error" role="alert">
                {error}
              </p>
            )}
            <table class="shared" aria-label="Shared files">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col" class="size">
                    Size
                  </th>
                  <th scope="col" class="mtime">
                    Modified
                  </th>
                </tr>
              </thead>
              <tbody>
                {entries.map((e) => (
                  <tr key={e.path}>
                    <td class="name">
                      {e.type === 'directory' ? (
                        <button type="button" class="link folder" onClick={() => void browse(e.path)}>
                          {nameOf(e.path)}
                        </button>
                      ) : downloads ? (
                        <a href={`${base}/files/${encodePath(e.path)}`} download={nameOf(e.path)}>
                          {nameOf(e.path)}
                        </a>
                      ) : (
                        <button type="button" class="link" onClick={() => setPreview(e)}>
                          {nameOf(e.path)}
                        </button>
                      )}
                    </td>
                    <td class="size">{e.type === 'directory' ? 'Folder' : formatSize(e.size)}</td>
                    <td class="mtime">{e.mtime ? dateFormat.format(new Date(e.mtime)) : ''}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            {entries.length === 0 && <p class="empty">This folder is empty.</p>}
            {preview && (
              <Preview
                entry={preview}
                onClose={() => setPreview(null)}
                urls={async (e) => {
                  const url = `${base}/preview/${encodePath(e.path)}`;
                  return { inline: url, bytes: url };
                }}
              />
            )}
          </>
        )}
      </main>
    </div>
  );
}
