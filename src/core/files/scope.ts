/**
 * SessionScope is what the core's file services (locks, dead properties, the write pipeline) need
 * of a FileSession: who asks and how their paths map to site paths. Typed here rather than as
 * FileSession, so those modules and session.ts do not import each other.
 */
import type { Principal } from '../principal.ts';

export interface SessionScope {
  readonly principal: Principal;
  /** the site folder the session sees as `/` ('' for the site root) */
  readonly root: string;
  /** site maps a client path to the site path */
  site(path: string): string;
  /** visible maps a site path back to the client's view */
  visible(site: string): string;
  /** WebDAV lock tokens the request submitted (none on the other front ends) */
  readonly lockTokens: ReadonlySet<string>;
}
