import { SessionEntity } from '../../db/entities.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import type { Principal } from '../principal.ts';
import { verifyPassword } from './passwords.ts';

/**
 * checkReauthentication enforces SPEC's `X-Svc-Reauthentication: password:<PASSWORD>` on the
 * sensitive requests (changing a password, creating an API key) of session-authenticated
 * principals; API keys are exempt. After `sessions.reauthentication_attempts` wrong passwords the
 * session is ended, so a stolen session cannot be used to guess the password.
 */
export async function checkReauthentication(
  ctx: CoreContext,
  p: Principal,
  header: string | undefined,
): Promise<void> {
  if (!p.sessionDigest || !p.user) return;
  if (header === undefined || header === '') {
    throw new GatewayError(
      'not-authorized/reauthentication-needed-action',
      'This action needs your password again: send it in the X-Svc-Reauthentication header as password:<PASSWORD>',
    );
  }
  if (!header.startsWith('password:')) {
    throw new GatewayError(
      'bad-request/reauthentication-needed-fields',
      'X-Svc-Reauthentication must be password:<PASSWORD>',
    );
  }
  const user = p.user;
  if (await verifyPassword(header.slice('password:'.length), user.password_hash)) return;
  const digest = p.sessionDigest;
  const failures = await ctx.db.work(async (em) => {
    await em.increment(SessionEntity, { id_digest: digest }, 'reauthentication_failures', 1);
    const row = await em.findOneBy(SessionEntity, { id_digest: digest });
    const count = row?.reauthentication_failures ?? Infinity;
    if (count >= ctx.config.sessions.reauthentication_attempts)
      await em.delete(SessionEntity, { id_digest: digest });
    return count;
  });
  if (failures >= ctx.config.sessions.reauthentication_attempts) {
    throw new GatewayError(
      'not-authorized/reauthentication-failed-final',
      'Reauthentication failed too often; the session has ended',
    );
  }
  throw new GatewayError('not-authorized/reauthentication-failed', 'Reauthentication failed: wrong password');
}
