/** The account page: a self-managed user changes their name, e-mail and password here. */
import { useState } from 'preact/hooks';
import { API, ApiError, request, type Me } from './api.ts';
import { Field } from './field.tsx';

export function Account(props: { me: Me; onChange: (user: Me['user']) => void }) {
  const { user } = props.me;
  const [name, setName] = useState(user.name ?? '');
  const [email, setEmail] = useState(user.email ?? '');
  const [current, setCurrent] = useState('');
  const [password, setPassword] = useState('');
  const [message, setMessage] = useState<{ ok: boolean; text: string } | null>(null);

  const heading = (
    <>
      <h1>Account</h1>
      <p>
        Signed in as <strong>{user.username}</strong>.
      </p>
    </>
  );
  if (!user.self_managed && !user.site_admin) {
    return (
      <main class="account">
        {heading}
        <p class="notice">
          Your administrator manages this account, so you cannot change its name, e-mail or password here. Ask
          them for any change.
        </p>
      </main>
    );
  }

  const save = async (e: Event, fields: Record<string, string>, reauthentication?: string) => {
    e.preventDefault();
    setMessage(null);
    try {
      const { data } = await request<Me['user']>('PATCH', `${API}/users/${user.id}`, {
        body: fields,
        headers: reauthentication ? { 'X-Svc-Reauthentication': `password:${reauthentication}` } : {},
      });
      props.onChange({ ...user, name: data.name, email: data.email });
      setMessage({ ok: true, text: 'Saved.' });
      setCurrent('');
      setPassword('');
    } catch (err) {
      // The API's wording speaks of its header; here the person typed their current password.
      const text =
        err instanceof ApiError && err.type === 'not-authorized/reauthentication-failed'
          ? 'Your current password is not right.'
          : err instanceof ApiError
            ? err.message
            : 'Saving failed.';
      setMessage({ ok: false, text });
    }
  };

  return (
    <main class="account">
      {heading}
      {message && (
        <p class={message.ok ? 'notice' : 'error'} role={message.ok ? 'status' : 'alert'}>
          {message.text}
        </p>
      )}
      <form onSubmit={(e) => save(e, { name, email })}>
        <h2>Details</h2>
        <Field label="Name" autocomplete="name" value={name} onValue={setName} />
        <Field label="E-mail" type="email" autocomplete="email" value={email} onValue={setEmail} />
        <button type="submit">Save details</button>
      </form>
      <form onSubmit={(e) => save(e, { password }, current)}>
        <h2>Password</h2>
        <Field
          label="Current password"
          type="password"
          required
          autocomplete="current-password"
          value={current}
          onValue={setCurrent}
        />
        <Field
          label="New password"
          type="password"
          required
          autocomplete="new-password"
          value={password}
          onValue={setPassword}
        />
        <button type="submit">Change password</button>
      </form>
    </main>
  );
}
