import type { ApiKeyRow, UserRow } from '../../db/entities.ts';

/** CachedKey is a verified API key row with its owner (null for site-wide keys). */
export interface CachedKey {
  row: ApiKeyRow;
  owner: UserRow | null;
}

/**
 * CredentialCache keeps verified API keys for a few seconds (setting api.credential_cache_seconds)
 * so a busy integration's requests do not each read the database: the 3,000 requests/s
 * on two cores leaves no room for two queries per request. Any change to users or keys on this
 * instance clears it at once; another instance sees a revoked key or a changed user within the
 * TTL. A TTL of 0 disables it.
 */
export class CredentialCache {
  private readonly entries = new Map<string, { value: CachedKey; at: number }>();
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

  /** get returns a fresh entry for a key digest. */
  get(digest: string): CachedKey | undefined {
    const e = this.entries.get(digest);
    if (!e) return undefined;
    if (Date.now() - e.at >= this.ttlMs) {
      this.entries.delete(digest);
      return undefined;
    }
    return e.value;
  }

  /** set remembers a verified key read in `generation`; a clear since then makes it a no-op. */
  set(digest: string, value: CachedKey, generation: number): void {
    if (this.ttlMs <= 0 || generation !== this.cleared) return;
    if (this.entries.size >= CredentialCache.MAX_ENTRIES) this.entries.clear();
    this.entries.set(digest, { value, at: Date.now() });
  }

  /** clear forgets everything: called on every change to users or keys. */
  clear(): void {
    this.cleared += 1;
    this.entries.clear();
  }
}
