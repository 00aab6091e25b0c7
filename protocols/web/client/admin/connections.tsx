/**
 * The Connections admin page (issue 15, item 4): everyone connected over FTP, SFTP and WebDAV on
 * every instance of the site (GET /connections, which site admins may read), with the transfer in
 * progress and its bytes so far, refreshed every few seconds; `End` ends one connection on
 * whatever instance serves it (DELETE /connections/:id) after a confirmation.
 */
import { useEffect, useState } from 'preact/hooks';
import { API, request, type Me } from '../api.ts';
import { Dialog } from '../dialogs.tsx';
import { dateFormat, formatSize } from '../paths.ts';
import { failed, MessageLine, Pager, useCursorList, type Message } from './kit.tsx';

/** REFRESH_MS is how often the list is read again (instances renew their rows every 3 s). */
const REFRESH_MS = 4000;

/** Connection is one row of GET /connections. */
interface Connection {
  id: number;
  instance: string;
  interface: string;
  user_id: number | null;
  username: string;
  ip: string;
  connected_at: string;
  last_seen_at: string;
  transfer_path: string | null;
  transfer_direction: 'upload' | 'download' | null;
  transfer_bytes: number;
  transfer_started_at: string | null;
  ending: boolean;
}

const PROTOCOLS: Record<string, string> = {
  ftp: 'FTP',
  sftp: 'SFTP',
  dav: 'WebDAV',
  restapi: 'REST API',
  web: 'Web',
};

/** protocolName is how the page names an interface. */
function protocolName(iface: string): string {
  return PROTOCOLS[iface] ?? iface;
}

/** who names a connection in sentences: “alice's SFTP connection from 203.0.113.9”. */
function who(c: Connection): string {
  return `${c.username || 'a site-wide key'}'s ${protocolName(c.interface)} connection from ${c.ip}`;
}

/** Transfer describes the transfer in progress, or says there is none. */
function Transfer(props: { c: Connection }) {
  const c = props.c;
  if (!c.transfer_path) return <span class="hint">None</span>;
  return (
    <span>
      {c.transfer_direction === 'upload' ? 'Uploading ' : 'Downloading '}
      <span class="connection-path">{c.transfer_path}</span>
      {`: ${formatSize(c.transfer_bytes)} so far`}
    </span>
  );
}

export function ConnectionsPage(_props: { me: Me }) {
  const list = useCursorList<Connection>(`${API}/connections`);
  const [message, setMessage] = useState<Message>(null);
  const [confirm, setConfirm] = useState<Connection | null>(null);
  const [busy, setBusy] = useState(false);
  const { reload } = list;

  useEffect(() => {
    const timer = setInterval(reload, REFRESH_MS);
    return () => clearInterval(timer);
  }, [reload]);

  const end = async (c: Connection) => {
    setBusy(true);
    try {
      await request('DELETE', `${API}/connections/${c.id}`);
      setMessage({ ok: true, text: `Ended ${who(c)}. It closes within a few seconds.` });
    } catch (err) {
      setMessage(failed(err, `${who(c)} could not be ended.`));
    } finally {
      setBusy(false);
      setConfirm(null);
      reload();
    }
  };

  return (
    <main class="admin">
      <h1>Connections</h1>
      <p class="hint">
        Everyone connected over FTP, SFTP and WebDAV, on every instance of the site, with the transfer in
        progress. The list refreshes every few seconds; an instance that stops answering drops out after 15
        seconds.
      </p>
      <MessageLine message={message} />
      <MessageLine message={list.error} />
      <table class="connections" aria-label="Connections">
        <thead>
          <tr>
            <th scope="col">User</th>
            <th scope="col">Protocol</th>
            <th scope="col">From</th>
            <th scope="col">Connected since</th>
            <th scope="col">Instance</th>
            <th scope="col">Transfer in progress</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {list.rows.length === 0 && !list.loading ? (
            <tr>
              <td colSpan={7} class="hint">
                Nobody is connected.
              </td>
            </tr>
          ) : null}
          {list.rows.map((c) => (
            <tr key={c.id}>
              <td>{c.username || 'Site-wide key'}</td>
              <td>{protocolName(c.interface)}</td>
              <td>{c.ip}</td>
              <td>{dateFormat.format(new Date(c.connected_at))}</td>
              <td class="connection-instance">{c.instance}</td>
              <td>
                <Transfer c={c} />
              </td>
              <td>
                {c.ending ? (
                  <span class="hint">Ending…</span>
                ) : (
                  <button type="button" class="danger" onClick={() => setConfirm(c)}>
                    End
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <Pager prev={list.prev} next={list.next} label="Connections pages" />
      {confirm ? (
        <Dialog title="End connection" onClose={() => setConfirm(null)}>
          <p>
            End {who(confirm)}?
            {confirm.transfer_path ? ` Its transfer of ${confirm.transfer_path} stops.` : ''} The client may
            connect again.
          </p>
          <div class="buttons">
            <button type="button" class="danger" disabled={busy} onClick={() => void end(confirm)}>
              End connection
            </button>
            <button type="button" onClick={() => setConfirm(null)}>
              Cancel
            </button>
          </div>
        </Dialog>
      ) : null}
    </main>
  );
}
