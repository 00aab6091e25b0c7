/**
 * The Site admin page (issue 15, site admins): read-only, what this gateway runs (listeners and
 * their ports, storage, database, version, instances) and the problems its operator should fix, as
 * GET /site reports them — the same checks `svc-gateway doctor` makes, in the same words.
 */
import { useEffect, useState } from 'preact/hooks';
import { API, request, type Me } from '../api.ts';
import { failed, MessageLine, type Message } from './kit.tsx';
import { HeadRow } from './table.tsx';

/** SiteStatus is GET /site's answer (dates as ISO text). */
interface SiteStatus {
  version: string;
  database: 'sqlite' | 'postgres';
  storage: { kind: 'local' | 's3'; bucket: string | null; endpoint: string | null };
  bind: string;
  public_url: string;
  listeners: { name: string; serves: string; enabled: boolean; port: number | null }[];
  ftp_passive_ports: string;
  ftp_passive_address: string;
  certificate: {
    file: string;
    generated: boolean;
    valid_from: string;
    valid_until: string;
    names: string;
  } | null;
  instances: { host: string; pid: number; version: string; started_at: string; current: boolean }[];
  problems: { check: string; severity: 'warn' | 'fail'; detail: string }[];
  checked_at: string;
}

const when = (iso: string) =>
  new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' }).format(new Date(iso));

/** PROTOCOLS are the listeners' names as people write them. */
const PROTOCOLS: Record<string, string> = {
  https: 'HTTPS',
  webdav: 'WebDAV',
  ftp: 'FTP',
  ftps: 'FTPS',
  sftp: 'SFTP',
};

const everywhere = (bind: string) => bind === '0.0.0.0' || bind === '::';

/** Problems lists what to fix, the failures first; none is said in words too. */
function Problems(props: { problems: SiteStatus['problems'] }) {
  const sorted = [...props.problems].sort(
    (a, b) => (a.severity === 'fail' ? 0 : 1) - (b.severity === 'fail' ? 0 : 1),
  );
  return (
    <section aria-labelledby="site-problems">
      <h2 id="site-problems">Problems to fix</h2>
      {sorted.length ? (
        <ul class="site-problems">
          {sorted.map((p) => (
            <li key={p.check} class={p.severity}>
              <strong>{p.severity === 'fail' ? 'Must fix' : 'Should fix'}</strong> · {p.check}: {p.detail}
            </li>
          ))}
        </ul>
      ) : (
        <p class="notice">No problems found.</p>
      )}
    </section>
  );
}

/** Running is what this gateway serves and where it keeps things. */
function Running(props: { site: SiteStatus }) {
  const { site } = props;
  const cert = site.certificate;
  return (
    <section aria-labelledby="site-running">
      <h2 id="site-running">What is running</h2>
      <dl class="site-facts">
        <dt>Version</dt>
        <dd>{site.version}</dd>
        <dt>Database</dt>
        <dd>{site.database === 'postgres' ? 'PostgreSQL' : 'SQLite'}</dd>
        <dt>Storage</dt>
        <dd>
          {site.storage.kind === 's3'
            ? `S3 bucket ${site.storage.bucket ?? ''}${site.storage.endpoint ? ` at ${site.storage.endpoint}` : ''}`
            : 'Local disk'}
        </dd>
        <dt>Listening on</dt>
        <dd>{everywhere(site.bind) ? `every address (${site.bind})` : site.bind}</dd>
        <dt>Public URL</dt>
        <dd>{site.public_url || 'not set'}</dd>
        <dt>Certificate</dt>
        <dd>
          {cert
            ? `${cert.generated ? 'self-signed (generated)' : cert.file}, valid until ${when(cert.valid_until)}; names ${cert.names}`
            : 'none yet'}
        </dd>
      </dl>
      <table class="site-table">
        <caption>Listeners</caption>
        <HeadRow columns={['Protocol', 'Serves', 'Status', 'Port']} />
        <tbody>
          {site.listeners.map((l) => (
            <tr key={l.name}>
              <th scope="row">{PROTOCOLS[l.name] ?? l.name}</th>
              <td>{l.serves}</td>
              <td>{l.enabled ? 'On' : 'Off'}</td>
              <td>{l.port ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {site.listeners.some((l) => l.enabled && (l.name === 'ftp' || l.name === 'ftps')) ? (
        <p>
          FTP passive ports {site.ftp_passive_ports}
          {site.ftp_passive_address
            ? `, announced as ${site.ftp_passive_address}`
            : ', no passive address set'}
          .
        </p>
      ) : null}
      <table class="site-table">
        <caption>Instances</caption>
        <HeadRow columns={['Host', 'Process', 'Version', 'Started']} />
        <tbody>
          {site.instances.map((i) => (
            <tr key={`${i.host}:${i.pid}`}>
              <th scope="row">
                {i.host}
                {i.current ? ' (this one)' : ''}
              </th>
              <td>{i.pid}</td>
              <td>{i.version}</td>
              <td>
                <time dateTime={i.started_at}>{when(i.started_at)}</time>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

export function SitePage(_props: { me: Me }) {
  const [site, setSite] = useState<SiteStatus | null>(null);
  const [message, setMessage] = useState<Message>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    request<SiteStatus>('GET', `${API}/site`)
      .then(({ data }) => {
        if (!live) return;
        setSite(data);
        setMessage(null);
      })
      .catch((err: unknown) => live && setMessage(failed(err, 'The site report could not be loaded.')));
    return () => {
      live = false;
    };
  }, [tick]);
  return (
    <main class="admin site">
      <h1>Site</h1>
      <MessageLine message={message} />
      {site ? (
        <>
          <Problems problems={site.problems} />
          <Running site={site} />
          <p class="site-checked">
            Checked {when(site.checked_at)}.{' '}
            <button type="button" onClick={() => setTick((t) => t + 1)}>
              Check again
            </button>
          </p>
        </>
      ) : message ? null : (
        <p class="loading">Loading…</p>
      )}
    </main>
  );
}
