/**
 * The gateway's Prometheus metrics (prom-client), one registry per core so that tests can run
 * several cores in one process. Each concept is counted in one place: connections in the listener
 * kit (protocols/shared/limits.ts), logins at the login gate, transfers and access lines in the
 * kit's observe.ts, errors where each protocol maps a GatewayError, database time in Database.
 * Labels take a handful of values each (interface, result, direction, SPEC error type): never a
 * path, a username or an address, so the number of series stays bounded.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** MetricsInterface is the `interface` label: SPEC's interfaces (the FTPS listener counts as ftp). */
export type MetricsInterface = 'restapi' | 'web' | 'ftp' | 'sftp' | 'dav';

/** Direction is a transfer's way: `in` is an upload to the gateway, `out` a download from it. */
export type Direction = 'in' | 'out';

/** counter makes a counter in `registry`. */
function counter<L extends string>(name: string, help: string, labelNames: readonly L[], registry: Registry) {
  return new Counter<L>({ name, help, labelNames, registers: [registry] });
}

/** histogram makes a histogram with `buckets` (seconds) in `registry`. */
function histogram<L extends string>(
  name: string,
  help: string,
  labelNames: readonly L[],
  buckets: number[],
  registry: Registry,
) {
  return new Histogram<L>({ name, help, labelNames, buckets, registers: [registry] });
}

/** Metrics holds the registry and the instruments the gateway's parts update. */
export class Metrics {
  readonly registry = new Registry();

  /** connections counts accepted and refused (over a connection limit) connections per interface */
  readonly connections = counter(
    'svc_connections_total',
    'Connections accepted or refused (over a connection limit), per interface',
    ['interface', 'result'] as const,
    this.registry,
  );

  /** openConnections is the number of connections open now, per interface */
  readonly openConnections = new Gauge({
    name: 'svc_connections_open',
    help: 'Connections open now, per interface',
    labelNames: ['interface'] as const,
    registers: [this.registry],
  });

  /** logins counts logins (one per login or failedlogin Action) by interface and result */
  readonly logins = counter(
    'svc_logins_total',
    'Logins per interface and result: success, a SPEC failure_type, rate_limited or unavailable',
    ['interface', 'result'] as const,
    this.registry,
  );

  /** transferBytes counts file bytes uploaded (in) and downloaded (out) per interface */
  readonly transferBytes = counter(
    'svc_transfer_bytes_total',
    'File bytes transferred per interface: in (uploads) and out (downloads), counted when a transfer ends',
    ['interface', 'direction'] as const,
    this.registry,
  );

  /** transferSeconds is the duration of file transfers, whole or failed */
  readonly transferSeconds = histogram(
    'svc_transfer_duration_seconds',
    'Duration of file transfers per interface, direction and result (ok or failed)',
    ['interface', 'direction', 'result'] as const,
    [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800],
    this.registry,
  );

  /** errors counts errors answered to clients, by SPEC error type (internal-server-error for bugs) */
  readonly errors = counter(
    'svc_errors_total',
    'Errors answered to clients per interface and SPEC error type',
    ['interface', 'type'] as const,
    this.registry,
  );

  /** requests counts access-logged requests: HTTP requests, FTP commands, SFTP requests */
  readonly requests = counter(
    'svc_requests_total',
    'Requests per interface and outcome (ok, or error: refused or failed)',
    ['interface', 'outcome'] as const,
    this.registry,
  );

  /** dbSeconds is how long database reads and units of work take (SQLite: once their turn comes) */
  readonly dbSeconds = histogram(
    'svc_db_query_duration_seconds',
    'Duration of database reads and units of work (transactions), by kind and result',
    ['kind', 'result'] as const,
    [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
    this.registry,
  );

  constructor() {
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

  /** text is the exposition text a Prometheus scrape reads. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  /** contentType is the exposition format's media type. */
  get contentType(): string {
    return this.registry.contentType;
  }
}
