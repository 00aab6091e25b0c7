import type { ApiKeyRow, UserRow } from '../../db/entities.ts';

/** CachedKey is a verified API key row with its owner (null for site-wide keys). */
export interface CachedKey {
  row: ApiKeyRow;
  owner: UserRow | null;
}

/** CachedLogin is a user whose password (the one hashed as `password_hash`) passed the gate. */
export interface CachedLogin {
  user: UserRow;
  /** the hash the password was verified against: while the user's row still holds it, no bcrypt */
  password_hash: string;
}

type Entry =
  { kind: 'key'; value: CachedKey; at: number } | { kind: 'login'; value: CachedLogin; at: number };

/**
 * CredentialCache is the one cache of verified credentials for every front end: API keys (REST,
 * WebDAV) and the passwords clients send with every request (WebDAV's HTTP Basic). Entries are
 * reused for a few seconds (setting accounts.credential_cache_seconds, at most 5) so a busy client
 * does not make each request read the database, nor run bcrypt. A login by password (FTP, SFTP,
 * REST, web) uses only the stale-entry rule below: it runs the whole gate every time, but bcrypt
 * only when the password was not verified against the user's current hash before.
 *
 * Why a short TTL plus a clear, and no version column: every change that matters to the gate
 * (password, user deleted, a `*_permission` flag, allowed_ips, a lockout) is made through the
 * core, which clears this cache after it commits, so the instance that made it applies it at once.
 * Another instance cannot be told without a query per request; its entries are simply trusted for
 * at most the TTL, after which the gate reads the user's row again. A login entry older than the
 * TTL is kept (not served): if the row still holds the hash the password was verified against, the
 * gate skips bcrypt, so revalidating every few seconds costs one indexed read, not a bcrypt run.
 * A TTL of 0 disables the cache.
 */
export class CredentialCache {
  private readonly entries = new Map<string, Entry>();
  private static readonly MAX_ENTRIES = 10_000;
  private cleared = 0;

  constructor(private readonly ttlMs: number) {}

  /**
   * generation counts the clears. A caller reads it before it reads the database and hands it to
   * set, so a lookup that was in flight while a change committed cannot cache what it read before.
   */
  get generation(): number {
    return this.cleared;
  }

  /** get returns a fresh API key entry for a key digest. */
  get(digest: string): CachedKey | undefined {
    const e = this.entries.get(digest);
    if (e?.kind !== 'key') return undefined;
    if (!this.fresh(e)) {
      this.entries.delete(digest);
      return undefined;
    }
    return e.value;
  }

  /** set remembers a verified key read in `generation`; a clear since then makes it a no-op. */
  set(digest: string, value: CachedKey, generation: number): void {
    this.put(digest, { kind: 'key', value, at: Date.now() }, generation);
  }

  /**
   * login returns the entry of a verified password and whether it is still fresh (usable without
   * the database); a stale entry only spares bcrypt while the user's hash is unchanged.
   */
  login(digest: string): { value: CachedLogin; fresh: boolean } | undefined {
    const e = this.entries.get(digest);
    if (e?.kind !== 'login') return undefined;
    return { value: e.value, fresh: this.fresh(e) };
  }

  /** setLogin remembers a password that passed the whole gate in `generation`. */
  setLogin(digest: string, value: CachedLogin, generation: number): void {
    this.put(digest, { kind: 'login', value, at: Date.now() }, generation);
  }

  /** clear forgets everything: called after every change to users or keys, and after a lockout. */
  clear(): void {
    this.cleared += 1;
    this.entries.clear();
  }

  private fresh(e: Entry): boolean {
    return Date.now() - e.at < this.ttlMs;
  }

  private put(digest: string, entry: Entry, generation: number): void {
    if (this.ttlMs <= 0 || generation !== this.cleared) return;
    if (this.entries.size >= CredentialCache.MAX_ENTRIES && !this.entries.has(digest)) this.entries.clear();
    this.entries.set(digest, entry);
  }
}
