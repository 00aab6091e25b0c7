/**
 * The gateway's Prometheus metrics (prom-client), one registry per core so that tests can run
 * several cores in one process. Each concept is counted in one place: connections in the listener
 * kit (protocols/shared/limits.ts), logins at the login gate, transfers and access lines in the
 * kit's observe.ts, errors where each protocol maps a GatewayError, database time in Database.
 * Labels take a handful of values each (interface, result, direction, SPEC error type): never a
 * path, a username or an address, so the number of series stays bounded.
 */
import { timingSafeEqual } from 'node:crypto';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { clientIp, ipInList } from './access/allowed-ips.ts';

/** HELP is each metric's description, as a scrape shows it (the README's table says the same). */
const HELP = {
  svc_connections_total: 'Connections accepted or refused (over a connection limit), per interface',
  svc_logins_total:
    'Logins per interface and result: success, a SPEC failure_type, rate_limited or unavailable',
  svc_transfer_bytes_total:
    'File bytes transferred per interface: in (uploads) and out (downloads), counted when a transfer ends',
  svc_transfer_duration_seconds:
    'Duration of file transfers per interface, direction and result (ok or failed)',
  svc_errors_total: 'Errors answered to clients per interface and SPEC error type',
  svc_requests_total: 'Requests per interface and outcome (ok, or error: refused or failed)',
  svc_db_query_duration_seconds:
    'Duration of database reads and units of work (transactions), by kind and result',
  svc_connections_open: 'Connections open now, per interface',
} as const;

/** Metrics holds the registry and the instruments the gateway's parts update. */
export class Metrics {
  readonly registry = new Registry();

  /** connections counts accepted and refused (over a connection limit) connections per interface */
  readonly connections = this.counter('svc_connections_total', ['interface', 'result']);

  /** openConnections is the number of connections open now, per interface */
  readonly openConnections = new Gauge({
    name: 'svc_connections_open',
    help: HELP.svc_connections_open,
    labelNames: ['interface'] as const,
    registers: [this.registry],
  });

  /** logins counts logins (one per login or failedlogin Action) by interface and result */
  readonly logins = this.counter('svc_logins_total', ['interface', 'result']);

  /** transferBytes counts file bytes uploaded (in) and downloaded (out) per interface */
  readonly transferBytes = this.counter('svc_transfer_bytes_total', ['interface', 'direction']);

  /** transferSeconds is the duration of file transfers, whole or failed */
  readonly transferSeconds = this.histogram(
    'svc_transfer_duration_seconds',
    ['interface', 'direction', 'result'],
    [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800],
  );

  /** errors counts errors answered to clients, by SPEC error type (internal-server-error for bugs) */
  readonly errors = this.counter('svc_errors_total', ['interface', 'type']);

  /** requests counts access-logged requests: HTTP requests, FTP commands, SFTP requests */
  readonly requests = this.counter('svc_requests_total', ['interface', 'outcome']);

  /** dbSeconds is how long database reads and units of work take (SQLite: once their turn comes) */
  readonly dbSeconds = this.histogram(
    'svc_db_query_duration_seconds',
    ['kind', 'result'],
    [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
  );

  /** counter makes a counter of this registry. */
  private counter<L extends string>(name: keyof typeof HELP, labelNames: readonly L[]): Counter<L> {
    return new Counter<L>({ name, help: HELP[name], labelNames, registers: [this.registry] });
  }

  /** histogram makes a histogram of this registry with `buckets` (seconds). */
  private histogram<L extends string>(
    name: keyof typeof HELP,
    labelNames: readonly L[],
    buckets: number[],
  ): Histogram<L> {
    return new Histogram<L>({ name, help: HELP[name], labelNames, buckets, registers: [this.registry] });
  }

  constructor(private readonly access: { allowed_ips: string[]; token: string }) {
    // Process and Node metrics: CPU, memory, open descriptors, GC, and event-loop delay
    // (nodejs_eventloop_lag_* from perf_hooks' monitorEventLoopDelay).
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 20 });
  }

  /**
   * gauge registers a gauge whose values `collect` sets at each scrape (queue depths, pools); a
   * collect that fails (the database is down) leaves the series out rather than failing the scrape.
   */
  gauge<L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    collect: (set: (labels: Partial<Record<L, string>>, value: number) => void) => Promise<void> | void,
  ): void {
    new Gauge<L>({
      name,
      help,
      labelNames,
      registers: [this.registry],
      async collect() {
        this.reset();
        try {
          await collect((labels, value) => this.set(labels, value));
        } catch {
          this.reset();
        }
      },
    });
  }

  /**
   * mayScrape tells whether a request may read the metrics: from an address in
   * `metrics.allowed_ips`, or carrying `metrics.token` as a bearer token (compared in constant time).
   */
  mayScrape(ip: string, authorization: string): boolean {
    const { allowed_ips: allowed, token } = this.access;
    if (allowed.length > 0 && ipInList(clientIp(ip), allowed)) return true;
    const m = token ? /^Bearer\s+(\S+)$/i.exec(authorization) : null;
    if (!m) return false;
    const sent = Buffer.from(m[1]!);
    const want = Buffer.from(token);
    return sent.length === want.length && timingSafeEqual(sent, want);
  }

  /** text is the exposition text a Prometheus scrape reads. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  /** contentType is the exposition format's media type. */
  get contentType(): string {
    return this.registry.contentType;
  }
}
