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
import './style.css';

const VIEWS = [
  ['files', 'Files'],
  ['shares', 'Share links'],
  ['account', 'Account'],
] as const;

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
  const [view, setView] = useState<(typeof VIEWS)[number][0]>('files');
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
              onClick={() => setView(v)}
            >
              {label}
            </button>
          ))}
        </nav>
        <span class="who">{me.user.name || me.user.username}</span>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      {view === 'files' ? (
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
