/**
 * The Webhooks admin page (issue 15): the webhook delivery log through SPEC's action notification
 * exports. An admin starts an export with its query fields, watches it build (GET by id until
 * `ready` or `failed`), downloads the CSV (results_url) and reads the deliveries page by page
 * (GET /action_notification_export_results), each with its HTTP status and outcome; a site admin
 * retries a failed one (POST /action_webhook_failures/{id}/retry, id: the delivery record's).
 * A Folder Admin must query by folder or path (SPEC): the page offers their folders.
 */
import { useEffect, useState } from 'preact/hooks';
import { API, request, type Me } from '../api.ts';
import { Field } from '../field.tsx';
import { dateFormat } from '../paths.ts';
import { failed, MessageLine, Pager, useCursorList, withQuery, type Message } from './kit.tsx';
import { localToIso, SelectField } from './activity-kit.tsx';

interface ExportView {
  id: number;
  status: 'building' | 'ready' | 'failed';
  results_url: string;
  query_folder: string;
  query_path: string;
}

interface Delivery {
  id: number;
  created_at: number;
  status: number;
  message: string;
  success: boolean;
  request_method: string;
  request_url: string;
  path: string;
}

interface Query {
  from: string;
  to: string;
  folder: string;
  path: string;
  status: string;
  success: '' | 'true' | 'false';
  url: string;
}

// How often a building export is asked about.
const POLL_MS = 1000;

/** useExport follows one export until it is ready or failed. */
function useExport(id: number | null) {
  const [view, setView] = useState<ExportView | null>(null);
  const [error, setError] = useState<Message>(null);
  useEffect(() => {
    setView(null);
    setError(null);
    if (id === null) return;
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = () =>
      request<ExportView>('GET', `${API}/action_notification_exports/${id}`)
        .then(({ data }) => {
          if (!live) return;
          setView(data);
          if (data.status === 'building') timer = setTimeout(poll, POLL_MS);
        })
        .catch((err: unknown) => live && setError(failed(err, 'The export could not be read.')));
    void poll();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [id]);
  return { view, error };
}

export function WebhooksPage(props: { me: Me }) {
  const siteAdmin = props.me.user.site_admin;
  const folders = props.me.user.admin_folders;
  const [q, setQ] = useState<Query>({
    from: '',
    to: '',
    folder: siteAdmin ? '' : (folders[0] ?? ''),
    path: '',
    status: '',
    success: '',
    url: '',
  });
  const [exportId, setExportId] = useState<number | null>(null);
  const [message, setMessage] = useState<Message>(null);
  const [busy, setBusy] = useState(false);
  const { view, error } = useExport(exportId);
  const ready = view?.status === 'ready';
  const results = useCursorList<Delivery>(
    ready
      ? withQuery(`${API}/action_notification_export_results`, { action_notification_export_id: view.id })
      : null,
  );
  const set = (patch: Partial<Query>) => setQ((v) => ({ ...v, ...patch }));

  const start = async () => {
    setBusy(true);
    setMessage(null);
    try {
      const { data } = await request<ExportView>('POST', `${API}/action_notification_exports`, {
        body: {
          start_at: localToIso(q.from),
          end_at: localToIso(q.to),
          query_folder: q.folder.trim().replace(/^\/+|\/+$/g, ''),
          query_path: q.path.trim().replace(/^\/+|\/+$/g, ''),
          query_status: q.status.trim(),
          query_success: q.success,
          query_request_url: q.url.trim(),
        },
      });
      setExportId(data.id);
    } catch (err) {
      setMessage(failed(err, 'The export could not be started.'));
    } finally {
      setBusy(false);
    }
  };

  const retry = async (d: Delivery) => {
    try {
      await request('POST', `${API}/action_webhook_failures/${d.id}/retry`);
      setMessage({
        ok: true,
        text: `Delivery ${d.id} to ${d.request_url} will be sent again now. Export again to see its result.`,
      });
    } catch (err) {
      setMessage(failed(err, 'The delivery could not be retried.'));
    }
  };

  return (
    <main class="admin activity">
      <h1>Webhooks</h1>
      <p class="hint">
        Every webhook delivery attempt is logged. Export the log for a time range to download it as CSV and
        read each delivery&apos;s result here.
      </p>
      <form
        class="filters"
        aria-label="Export the delivery log"
        onSubmit={(e) => {
          e.preventDefault();
          void start();
        }}
      >
        <Field label="From" type="datetime-local" value={q.from} onValue={(v) => set({ from: v })} />
        <Field label="To" type="datetime-local" value={q.to} onValue={(v) => set({ to: v })} />
        {siteAdmin ? (
          <Field label="Folder" value={q.folder} onValue={(v) => set({ folder: v })} />
        ) : (
          <SelectField
            label="Folder"
            value={q.folder}
            onValue={(v) => set({ folder: v })}
            options={folders.map((f): [string, string] => [f, `/${f}`])}
          />
        )}
        <Field label="File path" value={q.path} onValue={(v) => set({ path: v })} />
        <Field label="HTTP status" value={q.status} onValue={(v) => set({ status: v })} />
        <SelectField
          label="Outcome"
          value={q.success}
          onValue={(v) => set({ success: v as Query['success'] })}
          options={[
            ['', 'Any outcome'],
            ['true', 'Delivered'],
            ['false', 'Failed'],
          ]}
        />
        <Field label="Webhook URL" value={q.url} onValue={(v) => set({ url: v })} />
        <div class="buttons">
          <button type="submit" disabled={busy}>
            Export
          </button>
        </div>
      </form>
      <MessageLine message={message} />
      <MessageLine message={error} />
      {view ? (
        <section aria-label="Export">
          <p role="status">
            {view.status === 'building'
              ? `Export ${view.id} is being built…`
              : view.status === 'ready'
                ? `Export ${view.id} is ready.`
                : `Export ${view.id} failed.`}
          </p>
          {ready ? (
            <p>
              <a href={view.results_url} download>
                Download CSV
              </a>
            </p>
          ) : null}
        </section>
      ) : null}
      {ready ? (
        <>
          <MessageLine message={results.error} />
          <table class="grid" aria-label="Deliveries" aria-busy={results.loading}>
            <thead>
              <tr>
                <th scope="col">Sent</th>
                <th scope="col">Path</th>
                <th scope="col">Webhook</th>
                <th scope="col">HTTP status</th>
                <th scope="col">Result</th>
                {siteAdmin ? <th scope="col">Retry</th> : null}
              </tr>
            </thead>
            <tbody>
              {(results.error ? [] : results.rows).map((d) => (
                <tr key={d.id}>
                  <td>
                    <time dateTime={new Date(d.created_at * 1000).toISOString()}>
                      {dateFormat.format(new Date(d.created_at * 1000))}
                    </time>
                  </td>
                  <td class="path">/{d.path}</td>
                  <td class="path">
                    {d.request_method} {d.request_url}
                  </td>
                  <td>{d.status || '—'}</td>
                  <td class={d.success ? undefined : 'error'}>
                    {d.success ? 'Delivered' : 'Failed'}: {d.message}
                  </td>
                  {siteAdmin ? (
                    <td>
                      {d.success ? null : (
                        <button
                          type="button"
                          aria-label={`Retry delivery ${d.id}`}
                          onClick={() => void retry(d)}
                        >
                          Retry
                        </button>
                      )}
                    </td>
                  ) : null}
                </tr>
              ))}
            </tbody>
          </table>
          {!results.loading && !results.error && results.rows.length === 0 ? (
            <p class="empty">No deliveries match.</p>
          ) : null}
          <Pager prev={null} next={results.next} label="Delivery pages" />
        </>
      ) : null}
    </main>
  );
}
