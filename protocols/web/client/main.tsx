/** The web interface: sign-in, then the file browser or the account page. */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, request, setSession, type Me } from './api.ts';
import { Account } from './account.tsx';
import { Browser } from './browser.tsx';
import { BundlePage } from './bundle.tsx';
import { ShareLinks } from './share.tsx';
import { Field } from './field.tsx';
import { useIdleSignOut } from './idle.ts';
import { visibleAdminPages, type AdminPageId } from './admin/pages.ts';
import './style.css';
import './admin/admin.css';

const VIEWS = [
  ['files', 'Files'],
  ['shares', 'Share links'],
  ['account', 'Account'],
] as const;
type View = (typeof VIEWS)[number][0] | AdminPageId;
type AdminModule = typeof import('./admin/index.tsx');

/** viewOf reads the page's address (#users, #account); an unknown one is the file browser. */
function viewOf(hash: string, me: Me): View {
  const id = hash.replace(/^#/, '');
  if (VIEWS.some(([v]) => v === id)) return id as View;
  if (visibleAdminPages(me).some((p) => p.id === id)) return id as AdminPageId;
  return 'files';
}

function SignIn(props: { notice: string; onSignedIn: (me: Me) => void }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      const { data } = await request<Me>('POST', '/web/session', { body: { username, password } });
      props.onSignedIn(data);
    } catch (err) {
      setError(err instanceof ApiError ? err.message : 'Signing in failed.');
      setPassword('');
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <h1>Sign in</h1>
      {props.notice && !error && (
        <p class="notice" role="status">
          {props.notice}
        </p>
      )}
      <form onSubmit={submit}>
        <Field
          label="Username"
          name="username"
          autocomplete="username"
          required
          value={username}
          onValue={setUsername}
        />
        <Field
          label="Password"
          name="password"
          type="password"
          autocomplete="current-password"
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
          Sign in
        </button>
      </form>
    </main>
  );
}

function App() {
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const [notice, setNotice] = useState('');
  const [hash, setHash] = useState(location.hash);
  const [admin, setAdmin] = useState<AdminModule | null>(null);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  const signedIn = (m: Me) => {
    setSession(m.csrf, (message) => {
      setNotice(message);
      setMe(null);
    });
    setNotice('');
    setMe(m);
  };
  useIdleSignOut(me?.idle_timeout_seconds, (message) => {
    setNotice(message);
    setMe(null);
  });
  useEffect(() => {
    request<Me>('GET', '/web/session')
      .then(({ data }) => signedIn(data))
      .catch(() => setMe(null));
  }, []);
  if (me === undefined) return <p class="loading">Loading…</p>;
  if (me === null) return <SignIn notice={notice} onSignedIn={signedIn} />;
  const canShare = Boolean(me.user.attachments_permission || me.user.site_admin);
  const view = viewOf(hash, me);
  // An admin page this person may not open (or an unknown one) leaves no address behind.
  if (view === 'files' && hash && !hash.startsWith('#/'))
    history.replaceState(null, '', location.pathname + location.search);
  const adminPages = visibleAdminPages(me);
  const isAdminView = !VIEWS.some(([v]) => v === view);
  if (isAdminView && !admin) {
    import('./admin/index.tsx')
      .then(setAdmin)
      .catch(() => setNotice('The admin pages could not be loaded. Reload the page.'));
  }
  const go = (v: View) => {
    location.hash = v === 'files' ? '' : v;
    setHash(location.hash);
  };
  const signOut = async () => {
    await request('DELETE', '/web/session').catch(() => {});
    setNotice('You have signed out.');
    setMe(null);
  };
  return (
    <div class="shell">
      <header class="top">
        <strong class="brand">svc-gateway</strong>
        <nav aria-label="Main">
          {VIEWS.filter(([v]) => v !== 'shares' || canShare).map(([v, label]) => (
            <button
              key={v}
              type="button"
              class="link"
              aria-current={view === v ? 'page' : undefined}
              onClick={() => go(v)}
            >
              {label}
            </button>
          ))}
        </nav>
        {adminPages.length > 0 && (
          <nav aria-label="Administration" class="admin-nav">
            {adminPages.map((p) => (
              <button
                key={p.id}
                type="button"
                class="link"
                aria-current={view === p.id ? 'page' : undefined}
                onClick={() => go(p.id)}
              >
                {p.label}
              </button>
            ))}
          </nav>
        )}
        <span class="who">{me.user.name || me.user.username}</span>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      {isAdminView ? (
        admin ? (
          <admin.AdminPage id={view as AdminPageId} me={me} />
        ) : (
          <p class="loading">Loading…</p>
        )
      ) : view === 'files' ? (
        <Browser
          home={me.user.user_root ?? ''}
          userId={me.user.id}
          email={me.user.email ?? ''}
          canShare={canShare}
        />
      ) : view === 'shares' ? (
        <ShareLinks />
      ) : (
        <Account me={me} onChange={(user) => setMe({ ...me, user })} />
      )}
    </div>
  );
}

// A share link (/s/<code>) is its own page, for a recipient without an account.
const shared = /^\/s\/([^/]+)\/?$/.exec(location.pathname);
render(
  shared ? <BundlePage code={decodeURIComponent(shared[1]!)} /> : <App />,
  document.getElementById('app')!,
);
