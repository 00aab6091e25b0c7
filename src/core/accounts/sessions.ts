/**
 * REST sessions (SPEC "Session", "Authentication"). The id given to the client is 32 random
 * bytes; the database keeps only its SHA-256 digest, so a leaked database holds no usable session.
 * Sessions live in the database so any instance behind a load balancer accepts them.
 */
import { createHash, randomBytes } from 'node:crypto';
import { LessThan } from 'typeorm';
import { SessionEntity, UserEntity } from '../../db/entities.ts';
import { clientIp } from '../access/allowed-ips.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import type { Interface, Principal } from '../principal.ts';
import type { LoginGate, LoginRequest } from './login.ts';

// last_active_at is written at most this often (and at most a quarter of the idle timeout, so a
// short timeout does not end a session in use), so reads of a busy session stay reads.
const TOUCH_EVERY_MS = 60_000;

const digest = (id: string) => createHash('sha256').update(id).digest('hex');

/** Sessions creates, checks and ends REST sessions. */
export class Sessions {
  constructor(
    private readonly ctx: CoreContext,
    private readonly gate: LoginGate,
  ) {}

  /** create logs in through the gate and returns the new session id. */
  async create(req: LoginRequest): Promise<{ id: string; principal: Principal }> {
    const principal = await this.gate.login(req);
    const id = randomBytes(32).toString('hex');
    const now = new Date();
    const idle = this.ctx.config.sessions.idle_timeout_minutes * 60_000;
    await this.gate.guarded(req.interface, () =>
      this.ctx.db.work(async (em) => {
        // Expired sessions are dropped here rather than by a timer, so no instance needs to own cleanup.
        await em.delete(SessionEntity, { last_active_at: LessThan(new Date(now.getTime() - idle)) });
        await em.insert(SessionEntity, {
          id_digest: digest(id),
          user_id: principal.user!.id,
          ip: req.ip,
          interface: req.interface,
          reauthentication_failures: 0,
          created_at: now,
          last_active_at: now,
        });
      }),
    );
    return { id, principal: { ...principal, sessionDigest: digest(id) } };
  }

  /**
   * authenticate turns a session id into a principal, or throws not-authenticated (or
   * service-unavailable when the database does not answer: the session may well be valid).
   */
  async authenticate(id: string, iface: Interface, rawIp: string): Promise<Principal> {
    return this.gate.guarded(iface, () => this.check(id, iface, rawIp));
  }

  private async check(id: string, iface: Interface, rawIp: string): Promise<Principal> {
    const ip = clientIp(rawIp);
    const invalid = () =>
      new GatewayError('not-authenticated/authentication-required', 'Invalid or expired session');
    if (!/^[0-9a-f]{64}$/.test(id)) throw invalid();
    const d = digest(id);
    const found = await this.ctx.db.read(async (em) => {
      const session = await em.findOneBy(SessionEntity, { id_digest: d });
      const user = session ? await em.findOneBy(UserEntity, { id: session.user_id }) : null;
      return session && user ? { session, user } : null;
    });
    if (!found) throw invalid();
    const now = Date.now();
    const idle = this.ctx.config.sessions.idle_timeout_minutes * 60_000;
    if (now - found.session.last_active_at.getTime() > idle) {
      await this.ctx.db.work((em) => em.delete(SessionEntity, { id_digest: d }));
      throw invalid();
    }
    // The user may have lost access (flag, allowed_ips) since the session began.
    await this.gate.admit(found.user, iface, ip, false);
    if (now - found.session.last_active_at.getTime() > Math.min(TOUCH_EVERY_MS, idle / 4)) {
      await this.ctx.db.work((em) =>
        em.update(SessionEntity, { id_digest: d }, { last_active_at: new Date(now) }),
      );
    }
    return { user: found.user, apiKey: null, sessionDigest: d, interface: iface, ip };
  }

  /** destroy ends a session; an unknown id is not an error (SPEC: always an empty array). */
  async destroy(id: string): Promise<void> {
    await this.ctx.db.work((em) => em.delete(SessionEntity, { id_digest: digest(id) }));
  }
}
