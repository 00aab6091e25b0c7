/**
 * The login gate (DESIGN.md "Login gate"), the same for every interface: user exists and the
 * password matches (bcrypt), the interface's flag is on, the client IP is in the user's or the
 * site's allowed_ips, and for FTP, SFTP and WebDAV the user_root folder exists. Each failure is a
 * `failedlogin` Action with its failure_type; 5 failures (setting) lock the user out for a while,
 * and a client IP failing across usernames is rate-limited. State lives in the database, so every
 * instance sees the same lockouts.
 *
 * When the gate cannot answer (the database is down), that is a failure of the service, never a
 * wrong password: every entry point turns an unexpected error into
 * `service-unavailable/login-unavailable`, records no failedlogin and counts nothing toward a
 * lockout, and the cause is logged once, here.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { LessThan, type EntityManager } from 'typeorm';
import { afterCommit } from '../../db/database.ts';
import {
  ClientLoginEntity,
  FileEntity,
  PublicKeyEntity,
  UserEntity,
  type ApiKeyRow,
  type UserRow,
} from '../../db/entities.ts';
import { clientIp, ipAllowed } from '../access/allowed-ips.ts';
import { failedLoginsFrom, unknownNameFailures } from '../actions/failed-logins.ts';
import { recordAction, type FailureType } from '../actions/record.ts';
import type { CoreContext } from '../context.ts';
import { LogThrottle } from '../../log.ts';
import { GatewayError } from '../errors.ts';
import type { Interface, Principal } from '../principal.ts';
import { verifyPassword } from './passwords.ts';
import { fingerprintOf } from './public-keys.ts';

/** Credentials are what a client presents at login. */
export interface LoginRequest {
  interface: Interface;
  ip: string;
  username: string;
  password: string;
}

/** KeyLoginRequest is an SSH public-key login whose signature the protocol has verified. */
export interface KeyLoginRequest {
  interface: Interface;
  ip: string;
  username: string;
  /** the public key blob (SSH wire format) the client signed with */
  key: Buffer;
}

type GateRequest = Omit<LoginRequest, 'password'>;

const flagOf: Record<Interface, keyof UserRow> = {
  restapi: 'restapi_permission',
  web: 'web_permission',
  ftp: 'ftp_permission',
  sftp: 'sftp_permission',
  dav: 'dav_permission',
};
const noFlagFailure: Record<Interface, FailureType> = {
  restapi: 'no_restapi_permission',
  web: 'no_web_permission',
  ftp: 'no_ftp_permission',
  sftp: 'no_sftp_permission',
  dav: 'no_dav_permission',
};
const interfaceName: Record<Interface, string> = {
  restapi: 'REST API',
  web: 'web',
  ftp: 'FTP',
  sftp: 'SFTP',
  dav: 'WebDAV',
};
// The file protocols show user_root as `/`, so it must exist; REST and web use site paths.
const rootedInterfaces: readonly Interface[] = ['ftp', 'sftp', 'dav'];

/**
 * LoginRecording says when a successful login records a `login` Action: at each login (`each`), or
 * once per window per user, client IP and interface (`window`), for clients that send their
 * password with every request.
 */
type LoginRecording = 'each' | 'window';

/**
 * LOCKED_OUT_MESSAGE is the one text of `locked-out`. It avoids "too many" and "try again later":
 * lftp retries a 530 whose text matches its ftp:retry-530 rule, for ever (issue 12).
 */
const LOCKED_OUT_MESSAGE = 'This user is locked out after repeated failed logins';

/**
 * unknownNameLockedUntil replays the lockout rule of countFailure over an unknown name's failures
 * (ascending times): `max_failures` within `window_minutes` lock for `duration_minutes`, and
 * attempts during a lockout do not count. It returns when the last lockout ends (0: none).
 */
function unknownNameLockedUntil(
  times: readonly number[],
  lockout: { max_failures: number; window_minutes: number; duration_minutes: number },
): number {
  let until = 0;
  let count = 0;
  let start = 0;
  for (const t of times) {
    if (t < until) continue;
    if (count > 0 && t - start < lockout.window_minutes * 60_000) count++;
    else [count, start] = [1, t];
    if (count >= lockout.max_failures) [until, count] = [t + lockout.duration_minutes * 60_000, 0];
  }
  return until;
}

/** LoginGate admits principals: by password (login) or by API key (authenticateKey). */
export class LoginGate {
  // Only an HMAC of a password under this per-process key is kept in the credential cache.
  private readonly cacheKey = randomBytes(32);

  private readonly outages = new LogThrottle();
  private readonly rateLimited = new LogThrottle(60_000);

  constructor(private readonly ctx: CoreContext) {}

  /**
   * login runs the whole gate and records `login`, or `failedlogin` and throws. Every step runs
   * each time but bcrypt: a password this instance verified from the same client IP is known to
   * match while the user's row holds the same hash (SFTPGo's password_caching), so an FTP client
   * that opens a connection per transfer, or lftp's parallel ones, wait for bcrypt once.
   */
  async login(request: LoginRequest): Promise<Principal> {
    return this.guarded(request.interface, async () => {
      const digest = this.digestOf(request);
      const cached = this.ctx.credentials.login(digest);
      return this.passwordGate(request, digest, cached?.value.password_hash, 'each');
    });
  }

  /**
   * authenticatePassword admits a request that carries the user's password, as WebDAV clients
   * send HTTP Basic with every request. It is the same gate as login, answered from the core's
   * credential cache for a few seconds (see CredentialCache for why that is safe), and a `login`
   * Action is recorded for the client's first request and then once per
   * accounts.login_window_seconds, counted in the database so every instance shares the window.
   */
  async authenticatePassword(request: LoginRequest): Promise<Principal> {
    return this.guarded(request.interface, async () => {
      const digest = this.digestOf(request);
      const cached = this.ctx.credentials.login(digest);
      if (cached?.fresh) return this.principalOf(cached.value.user, request.interface, clientIp(request.ip));
      return this.passwordGate(request, digest, cached?.value.password_hash, 'window');
    });
  }

  /**
   * digestOf names a login attempt in the credential cache: an HMAC, under a key of this process,
   * of the interface, username, password and client IP, so only a client that sent this password
   * from this address before can find the entry, and no password is kept.
   */
  private digestOf(request: LoginRequest): string {
    return createHmac('sha256', this.cacheKey)
      .update(`${request.interface}\0${request.username}\0${request.password}\0${clientIp(request.ip)}`)
      .digest('base64url');
  }

  /**
   * passwordGate runs the gate for a password and remembers a success under `digest`. `verified`
   * is the hash this password was verified against before: while the user's row still holds it,
   * it matches without bcrypt. A lockout or any change to the user clears the cache (see
   * CredentialCache), so the shortcut never outlives them on this instance; another instance's
   * change shows in the row, which every login reads.
   */
  private async passwordGate(
    request: LoginRequest,
    digest: string,
    verified: string | undefined,
    recording: LoginRecording,
  ): Promise<Principal> {
    const generation = this.ctx.credentials.generation;
    const principal = await this.run(
      request,
      'password_mismatch',
      (user) =>
        verified !== undefined && user?.password_hash === verified
          ? Promise.resolve(true)
          : this.verify(request.password, user),
      recording,
    );
    const user = principal.user!;
    if (user.password_hash)
      this.ctx.credentials.setLogin(digest, { user, password_hash: user.password_hash }, generation);
    return principal;
  }

  /**
   * guarded runs one step of the gate, turning anything but a GatewayError (the database did not
   * answer, a pool that cannot connect) into `service-unavailable/login-unavailable`, logged once
   * here: a front end must never tell a user with the right password that it is wrong.
   */
  async guarded<T>(iface: Interface, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      // The database layer names an outage database-unavailable; at the gate it is a login that
      // cannot be checked, the more precise answer.
      if (err instanceof GatewayError && err.type !== 'service-unavailable/database-unavailable') throw err;
      // Every request of an outage fails here alike: one line per interface every few seconds.
      const held = this.outages.take(iface);
      this.ctx.metrics.logins.inc({ interface: iface, result: 'unavailable' });
      if (held)
        this.ctx.log.error('login gate unavailable: the database did not answer', {
          interface: iface,
          error: err instanceof Error ? err.message : String(err),
          ...(held.held ? { held_back: held.held } : {}),
        });
      throw new GatewayError(
        'service-unavailable/login-unavailable',
        'Logins cannot be checked right now; try again later',
      );
    }
  }

  private verify(password: string, user: UserRow | null): Promise<boolean> {
    return verifyPassword(password, user?.password_hash ?? null, this.ctx.config.accounts.bcrypt_rounds);
  }

  private principalOf(user: UserRow, iface: Interface, ip: string): Principal {
    return { user, apiKey: null, sessionDigest: null, interface: iface, ip };
  }

  /**
   * loginWithKey runs the same gate for an SSH public-key login: the protocol has already verified
   * the client's signature over the session with `key` (the SSH wire-format blob); the core decides
   * whether that key is one of the user's and admits them. A key that is not theirs is a
   * `failedlogin` with failure_type key_mismatch; it does not count toward the lockout.
   */
  async loginWithKey(request: KeyLoginRequest): Promise<Principal> {
    return this.guarded(request.interface, () =>
      this.run(request, 'key_mismatch', (user) => this.hasKey(user, request.key), 'each'),
    );
  }

  /**
   * acceptsKey tells, without recording anything, whether `key` is one of the user's keys: SSH
   * clients offer keys before signing with one, and a declined offer is not a failed login.
   */
  async acceptsKey(iface: Interface, username: string, key: Buffer): Promise<boolean> {
    return this.guarded(iface, async () => {
      const user = await this.ctx.db.read((em) =>
        em.findOneBy(UserEntity, { username_key: username.toLowerCase() }),
      );
      return this.hasKey(user, key);
    });
  }

  private async hasKey(user: UserRow | null, key: Buffer): Promise<boolean> {
    if (!user) return false;
    const fingerprint = fingerprintOf(key);
    return this.ctx.db.read((em) => em.existsBy(PublicKeyEntity, { user_id: user.id, fingerprint }));
  }

  private async run(
    request: GateRequest,
    mismatch: 'password_mismatch' | 'key_mismatch',
    verify: (user: UserRow | null) => Promise<boolean>,
    recording: LoginRecording,
  ): Promise<Principal> {
    const req = { interface: request.interface, username: request.username, ip: clientIp(request.ip) };
    const { lockout } = this.ctx.config;
    const now = Date.now();
    const ipWindowStart = new Date(now - lockout.ip_window_minutes * 60_000);
    const nameKey = req.username.slice(0, 50).toLowerCase();
    const { user, ipFailures, nameFailures } = await this.ctx.db.read(async (em) => ({
      user: await em.findOneBy(UserEntity, { username_key: req.username.toLowerCase() }),
      ipFailures: await failedLoginsFrom(em, req.ip, ipWindowStart),
      // Read on every login, not only for unknown names, so the work (and the time) is the same.
      nameFailures: await unknownNameFailures(
        em,
        nameKey,
        new Date(now - (lockout.window_minutes + lockout.duration_minutes) * 60_000),
      ),
    }));
    // Checked before bcrypt so a password-guessing client cannot make the server burn CPU.
    if (ipFailures >= lockout.ip_max_failures) {
      this.ctx.metrics.logins.inc({ interface: req.interface, result: 'rate_limited' });
      // One line per address a minute: a guessing client would otherwise write one per attempt.
      const held = this.rateLimited.take(req.ip);
      if (held)
        this.ctx.log.warn('login refused: too many failed logins from this address', {
          interface: req.interface,
          user: req.username.slice(0, 50),
          ip: req.ip,
          failed_logins: ipFailures,
          ...(held.held ? { held_back: held.held } : {}),
        });
      // Like LOCKED_OUT_MESSAGE, the text avoids what lftp's ftp:retry-530 retries for ever.
      throw new GatewayError(
        'rate-limited/too-many-login-attempts',
        `Logins from this address are refused for up to ${lockout.ip_window_minutes} minutes after repeated failed logins`,
      );
    }
    // An unknown name is locked out exactly as a user would be after the same failures, so neither
    // the answer nor its timing tells which usernames exist (issue 12: `locked-out` came in 5 ms,
    // an unknown name's `invalid-username-or-password` after bcrypt).
    const lockedUntil = user
      ? (user.locked_until?.getTime() ?? 0)
      : unknownNameLockedUntil(nameFailures, lockout);
    // bcrypt runs on every path, locked or not, user or not: the same work for every answer.
    const matches = await verify(user);
    if (lockedUntil > now) {
      // A known user's attempt is `locked_out`; an unknown name's stays `username_not_found`, the
      // truth for the admin reading the log, and does not count (it came during the lockout).
      await this.fail(req, user, user ? 'locked_out' : 'username_not_found');
      throw new GatewayError('not-authenticated/locked-out', LOCKED_OUT_MESSAGE);
    }
    if (!matches || !user) {
      await this.fail(req, user, user ? mismatch : 'username_not_found');
      throw new GatewayError(
        'not-authenticated/invalid-username-or-password',
        'Invalid username or password',
      );
    }
    await this.admit(user, req.interface, req.ip, true);
    const principal = this.principalOf(user, req.interface, req.ip);
    await this.ctx.db.work(async (em) => {
      await em.update(
        UserEntity,
        { id: user.id },
        { failed_logins: 0, failed_login_window_start: null, locked_until: null, last_login_at: new Date() },
      );
      if (recording === 'window' && !(await this.claimLoginWindow(em, principal))) return;
      await recordAction(em, principal, {
        action: 'login',
        display: `${user.username} logged in over ${interfaceName[req.interface]}`,
      });
      // Counted and logged as the Action is: WebDAV's per-request logins once per window.
      afterCommit(em, () => {
        this.ctx.metrics.logins.inc({ interface: req.interface, result: 'success' });
        this.ctx.log.info('login', { interface: req.interface, user: user.username, ip: req.ip });
      });
    });
    return principal;
  }

  /**
   * claimLoginWindow tells whether this login opens a new window for its user, client IP and
   * interface, and if so starts it. One statement decides, so two instances (or two requests)
   * racing for one client claim it once: on PostgreSQL the loser of the insert waits for the
   * winner's row and then finds its window open; SQLite runs one unit of work at a time.
   */
  private async claimLoginWindow(em: EntityManager, p: Principal): Promise<boolean> {
    const now = Date.now();
    const cutoff = now - this.ctx.config.accounts.login_window_seconds * 1000;
    const table = em.connection.getMetadata(ClientLoginEntity).tableName;
    const args = [p.user!.id, p.ip, p.interface, now, cutoff];
    const sql =
      `INSERT INTO ${table} (user_id, ip, interface, login_at) VALUES (?, ?, ?, ?) ` +
      `ON CONFLICT (user_id, ip, interface) DO UPDATE SET login_at = excluded.login_at ` +
      `WHERE ${table}.login_at <= ? RETURNING user_id`;
    let n = 0;
    const rows = (await em.query(
      this.ctx.db.kind === 'postgres' ? sql.replace(/\?/g, () => `$${++n}`) : sql,
      args,
    )) as unknown[];
    if (rows.length === 0) return false;
    // The user's rows of windows long closed go here too, so the table holds live windows only.
    await em.delete(ClientLoginEntity, { user_id: p.user!.id, login_at: LessThan(new Date(cutoff)) });
    return true;
  }

  /** authenticateKey admits an API-key request: the key's owner must pass the flag and IP checks. No Action is recorded. */
  async authenticateKey(
    row: ApiKeyRow,
    user: UserRow | null,
    iface: Interface,
    rawIp: string,
  ): Promise<Principal> {
    const ip = clientIp(rawIp);
    if (user) {
      await this.admit(user, iface, ip, false);
    } else if (!ipAllowed(ip, '', this.ctx.config.site.allowed_ips)) {
      throw new GatewayError(
        'not-authenticated/invalid-credentials',
        'Login from this IP address is not allowed',
      );
    }
    return { user, apiKey: row, sessionDigest: null, interface: iface, ip };
  }

  /**
   * admit applies the checks after the credential matched: interface flag, allowed_ips, user_root.
   * `record` writes the failedlogin Action (password logins); key requests record none.
   */
  async admit(user: UserRow, iface: Interface, ip: string, record: boolean): Promise<void> {
    const refuse = async (failure: FailureType, message: string): Promise<never> => {
      if (record) await this.fail({ interface: iface, ip, username: user.username }, user, failure);
      throw new GatewayError('not-authenticated/invalid-credentials', message);
    };
    if (!user[flagOf[iface]])
      await refuse(noFlagFailure[iface], `${interfaceName[iface]} access is disabled for this user`);
    if (!ipAllowed(ip, user.allowed_ips, this.ctx.config.site.allowed_ips)) {
      await refuse('ip_mismatch', 'Login from this IP address is not allowed');
    }
    if (rootedInterfaces.includes(iface) && user.user_root !== '') {
      const root = user.user_root.replace(/\/$/, '');
      const exists = await this.ctx.db.read((em) =>
        em.existsBy(FileEntity, { path: root, type: 'directory' }),
      );
      if (!exists) await refuse('no_directory', `This user's root folder /${root} does not exist`);
    }
  }

  /** fail records a failedlogin and, for wrong passwords, counts toward the user's lockout. */
  private async fail(req: GateRequest, user: UserRow | null, failure: FailureType): Promise<void> {
    const { lockout } = this.ctx.config;
    await this.ctx.db.work(async (em) => {
      await recordAction(em, null, {
        action: 'failedlogin',
        failure_type: failure,
        user: { id: user?.id ?? null, username: user?.username ?? req.username.slice(0, 50) },
        interface: req.interface,
        ip: req.ip,
        display: `Failed login as ${req.username.slice(0, 50)} over ${interfaceName[req.interface]}: ${failure}`,
      });
      const lockedOut =
        user && failure === 'password_mismatch' && (await this.countFailure(em, user.id, lockout));
      afterCommit(em, () => {
        this.ctx.metrics.logins.inc({ interface: req.interface, result: failure });
        const who = { interface: req.interface, user: req.username.slice(0, 50), ip: req.ip };
        this.ctx.log.warn('login failed', { ...who, failure_type: failure });
        if (!lockedOut) return;
        // A lockout applies at once to this instance's cached credentials (WebDAV clients).
        this.ctx.credentials.clear();
        this.ctx.log.warn('user locked out', {
          ...who,
          minutes: lockout.duration_minutes,
          after_failures: lockout.max_failures,
        });
      });
    });
  }

  private async countFailure(
    em: EntityManager,
    userId: number,
    lockout: CoreContext['config']['lockout'],
  ): Promise<boolean> {
    // On PostgreSQL the row is locked, so simultaneous failures (from several instances) each
    // count; SQLite's queue already runs one unit of work at a time.
    const fresh = await em.findOne(UserEntity, {
      where: { id: userId },
      ...(this.ctx.db.kind === 'postgres' ? { lock: { mode: 'pessimistic_write' as const } } : {}),
    });
    if (!fresh) return false;
    const now = Date.now();
    const windowOpen =
      fresh.failed_login_window_start &&
      now - fresh.failed_login_window_start.getTime() < lockout.window_minutes * 60_000;
    const count = windowOpen ? fresh.failed_logins + 1 : 1;
    const start = windowOpen ? fresh.failed_login_window_start : new Date(now);
    if (count >= lockout.max_failures) {
      await em.update(
        UserEntity,
        { id: userId },
        {
          failed_logins: 0,
          failed_login_window_start: null,
          locked_until: new Date(now + lockout.duration_minutes * 60_000),
        },
      );
      return true;
    }
    await em.update(UserEntity, { id: userId }, { failed_logins: count, failed_login_window_start: start });
    return false;
  }
}
