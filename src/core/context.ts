import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import type { Logger } from '../log.ts';
import type { CredentialCache } from './accounts/credential-cache.ts';
import type { Metrics } from './metrics.ts';
import type { Paginator } from './pagination.ts';

/** CoreContext is what every core service shares: settings, database, logger, secret, paginator. */
export interface CoreContext {
  readonly config: Config;
  readonly db: Database;
  readonly log: Logger;
  /** the site secret (SVC_SECRET or the generated one): signs URLs, encrypts cursors */
  readonly secret: string;
  readonly paginator: Paginator;
  /** the one cache of verified credentials (API keys, passwords), kept briefly; cleared on any account change */
  readonly credentials: CredentialCache;
  /** the gateway's Prometheus metrics */
  readonly metrics: Metrics;
}
