/**
 * The sharer's side of share links: the Share dialog of the file browser (kind, password, expiry,
 * maximum uses; then the link to copy) and the "Share links" page listing the user's links with
 * their uses and expiry, each with Revoke. Everything goes through the REST resource /bundles.
 */
import { useEffect, useState } from 'preact/hooks';
import { API, ApiError, request } from './api.ts';
import { Dialog } from './dialogs.tsx';
import { dateFormat } from './paths.ts';
import './share.css';

/** Bundle is a share link as /bundles answers it. */
export interface Bundle {
  id: number;
  code: string;
  url: string;
  paths: string[];
  kind: 'download' | 'preview' | 'upload';
  description: string;
  expires_at: string | null;
  max_uses: number | null;
  uses: number;
  has_password: boolean;
  created_at: string;
  user_id: number;
}

const KINDS = {
  download: 'Download',
  preview: 'Preview only',
  upload: 'Upload request',
} as const;

/** linkOf is the link on this page's own origin (the configured public URL may name another host). */
function linkOf(b: Bundle): string {
  return `${location.origin}/s/${b.code}`;
}

function CopyLink(props: { url: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.url);
      setCopied(true);
    } catch {
      // Without clipboard access (an insecure context, a denied permission) the field stays selectable.
      setCopied(false);
    }
  };
  return (
    <div class="copy">
      <label>
        Link
        <input readOnly value={props.url} onFocus={(e) => e.currentTarget.select()} />
      </label>
      <button type="button" onClick={() => void copy()}>
        {copied ? 'Copied' : 'Copy link'}
      </button>
    </div>
  );
}

/**
 * ShareDialog makes a share link of `paths`; `uploadable` offers an upload request (one folder
 * selected, which the user may write into).
 */
export function ShareDialog(props: { paths: string[]; uploadable: boolean; onClose: () => void }) {
  const [kind, setKind] = useState<Bundle['kind']>('download');
  const [password, setPassword] = useState('');
  const [expires, setExpires] = useState('');
  const [maxUses, setMaxUses] = useState('');
  const [description, setDescription] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const [made, setMade] = useState<Bundle | null>(null);
  const what =
    props.paths.length === 1
      ? props.paths[0]!.slice(props.paths[0]!.lastIndexOf('/') + 1)
      : `${props.paths.length} items`;

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      const body: Record<string, unknown> = { paths: props.paths, kind };
      if (password) body.password = password;
      // The end of the chosen day, in the user's time zone.
      if (expires) body.expires_at = new Date(`${expires}T23:59:59`).toISOString();
      if (maxUses) body.max_uses = Number(maxUses);
      if (description) body.description = description;
      const { data } = await request<Bundle>('POST', `${API}/bundles`, { body });
      setMade(data);
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <Dialog title={`Share ${what}`} onClose={props.onClose}>
      {made ? (
        <>
          <p role="status">
            Anyone with this link can {made.kind === 'upload' ? 'send files into it' : 'see what you shared'}.
          </p>
          <CopyLink url={linkOf(made)} />
          <div class="buttons">
            <button type="button" onClick={props.onClose}>
              Done
            </button>
          </div>
        </>
      ) : (
        <form onSubmit={submit}>
          <label>
            Kind
            <select value={kind} onChange={(e) => setKind(e.currentTarget.value as Bundle['kind'])}>
              <option value="download">{KINDS.download}</option>
              <option value="preview">{KINDS.preview}</option>
              {props.uploadable && <option value="upload">{KINDS.upload}</option>}
            </select>
          </label>
          <label>
            Password (optional)
            <input
              type="password"
              autocomplete="new-password"
              value={password}
              onInput={(e) => setPassword(e.currentTarget.value)}
            />
          </label>
          <label>
            Expires on (optional)
            <input type="date" value={expires} onInput={(e) => setExpires(e.currentTarget.value)} />
          </label>
          <label>
            Maximum uses (optional)
            <input
              type="number"
              min={1}
              inputMode="numeric"
              value={maxUses}
              onInput={(e) => setMaxUses(e.currentTarget.value)}
            />
          </label>
          <label>
            Note for recipients (optional)
            <input value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
          </label>
          {error && (
            <p class="error" role="alert">
              {error}
            </p>
          )}
          <div class="buttons">
            <button type="submit" disabled={busy}>
              Create link
            </button>
            <button type="button" onClick={props.onClose}>
              Cancel
            </button>
          </div>
        </form>
      )}
    </Dialog>
  );
}

/** ShareLinks is the page of the user's share links, with their uses and expiry, and Revoke. */
export function ShareLinks() {
  const [links, setLinks] = useState<Bundle[] | null>(null);
  const [error, setError] = useState('');
  const [status, setStatus] = useState('');
  const [revoking, setRevoking] = useState<Bundle | null>(null);

  const load = async () => {
    try {
      const all: Bundle[] = [];
      let cursor = '';
      for (;;) {
        const { data, headers } = await request<Bundle[]>(
          'GET',
          `${API}/bundles${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ''}`,
        );
        all.push(...data);
        cursor = headers.get('X-Svc-Cursor-Next') ?? '';
        if (!cursor) break;
      }
      setLinks(all);
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    }
  };
  useEffect(() => {
    void load();
  }, []);

  const revoke = async (b: Bundle) => {
    setError('');
    try {
      await request('DELETE', `${API}/bundles/${b.id}`);
      setStatus(`The link to ${b.paths.map((p) => `/${p}`).join(', ')} was revoked.`);
      await load();
    } catch (err) {
      setError(err instanceof ApiError ? err.message : String(err));
    }
  };

  const expired = (b: Bundle) => b.expires_at !== null && new Date(b.expires_at).getTime() <= Date.now();
  return (
    <main class="browser share-links">
      <h1>Share links</h1>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <p class="status" role="status">
        {status}
      </p>
      {links === null ? (
        <p class="loading">Loading…</p>
      ) : links.length === 0 ? (
        <p class="empty">You have no share links. Select files in Files and choose Share.</p>
      ) : (
        <table class="shared" aria-label="Your share links">
          <thead>
            <tr>
              <th scope="col">Shared</th>
              <th scope="col">Kind</th>
              <th scope="col">Uses</th>
              <th scope="col">Expires</th>
              <th scope="col">Link</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {links.map((b) => (
              <tr key={b.id}>
                <td class="name">
                  {b.paths.map((p) => `/${p}`).join(', ')}
                  {b.has_password ? ' (password)' : ''}
                  {b.description && <div class="hint">{b.description}</div>}
                </td>
                <td>{KINDS[b.kind]}</td>
                <td>
                  {b.uses}
                  {b.max_uses !== null ? ` of ${b.max_uses}` : ''}
                </td>
                <td>
                  {b.expires_at ? dateFormat.format(new Date(b.expires_at)) : 'Never'}
                  {expired(b) ? ' (expired)' : ''}
                </td>
                <td>
                  <input
                    class="link-field"
                    readOnly
                    aria-label={`Link to ${b.paths.join(', ')}`}
                    value={linkOf(b)}
                    onFocus={(e) => e.currentTarget.select()}
                  />
                </td>
                <td>
                  <button type="button" class="danger" onClick={() => setRevoking(b)}>
                    Revoke
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {revoking && (
        <Dialog title="Revoke link" onClose={() => setRevoking(null)}>
          <p>Revoke the link to {revoking.paths.map((p) => `/${p}`).join(', ')}? It stops working at once.</p>
          <div class="buttons">
            <button
              type="button"
              class="danger"
              onClick={() => {
                const b = revoking;
                setRevoking(null);
                void revoke(b);
              }}
            >
              Revoke
            </button>
            <button type="button" onClick={() => setRevoking(null)}>
              Cancel
            </button>
          </div>
        </Dialog>
      )}
    </main>
  );
}
