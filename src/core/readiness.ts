/**
 * Readiness (/readyz): whether this instance should be sent traffic. It is when the database runs a
 * trivial statement and the blob store answers a lookup of a blob that does not exist, each within
 * a short timeout, and the instance is not draining (SIGTERM received). Liveness (/healthz) is
 * another question: a gateway whose database is away is alive and recovers by itself.
 */
import type { Database } from '../db/database.ts';
import type { BlobStore } from './files/blobstore.ts';

/** PROBE_TIMEOUT_MS bounds each probe: a balancer's check must get an answer, not a hang. */
const PROBE_TIMEOUT_MS = 2_000;

/** ReadinessReport is the answer of /readyz: ready or not, and each check's result ('ok' or what failed). */
export interface ReadinessReport {
  ready: boolean;
  checks: { database: string; storage: string; draining: boolean };
}

/** within rejects with a timeout after `ms` when `p` has not settled by then; `what` names it. */
export function within<T>(p: Promise<T>, ms: number, what = ''): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what ? `${what}: ` : ''}no answer within ${ms / 1000} s`)),
      ms,
    );
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/**
 * failure describes a failed probe briefly, by its code where there is one (ECONNREFUSED,
 * ENOENT), never with a URL or a host name: /readyz answers anyone.
 */
function failure(err: unknown): string {
  const e = err as { code?: unknown; name?: string; message?: string };
  if (typeof e.code === 'string' && e.code) return e.code;
  if (e.message?.startsWith('no answer within')) return e.message;
  return e.name && e.name !== 'Error' ? e.name : 'failed';
}

/** Readiness answers /readyz for one core. */
export class Readiness {
  private draining = false;

  constructor(
    private readonly db: Database,
    private readonly store: BlobStore,
  ) {}

  /** drain marks the instance as stopping; it is never ready again. */
  drain(): void {
    this.draining = true;
  }

  /** check probes the database and the blob store at once. */
  async check(): Promise<ReadinessReport> {
    const probe = (p: () => Promise<unknown>) =>
      within(p(), PROBE_TIMEOUT_MS).then(
        () => 'ok',
        (err: unknown) => failure(err),
      );
    const [database, storage] = await Promise.all([
      probe(() => this.db.ping()),
      // A blob id that is never made: the lookup answers null through the store's real path.
      probe(async () => {
        await this.store.probe?.();
        await this.store.size('readyz-probe');
      }),
    ]);
    return {
      ready: database === 'ok' && storage === 'ok' && !this.draining,
      checks: { database, storage, draining: this.draining },
    };
  }
}
