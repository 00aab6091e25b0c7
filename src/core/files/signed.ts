/**
 * Signed transfer URLs (SPEC: download URLs valid 3 minutes, upload URLs 15 minutes, "signed by
 * the service"). A token is base64url(JSON claims) + '.' + base64url(HMAC-SHA256), keyed from the
 * site secret, so any instance sharing SVC_SECRET accepts it and nobody can forge or extend one.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { GatewayError } from '../errors.ts';

/** DOWNLOAD_TTL_S and UPLOAD_TTL_S are SPEC's validity periods. */
export const DOWNLOAD_TTL_S = 180;
export const UPLOAD_TTL_S = 900;

/** Signer makes and checks tokens for one purpose ('download', 'upload'). */
export class Signer {
  private readonly key: Buffer;

  constructor(secret: string, purpose: string) {
    this.key = createHmac('sha256', secret).update(`signed-url:${purpose}`).digest();
  }

  /** sign makes a token carrying `claims` that expires in `ttlSeconds`. */
  sign(claims: Record<string, unknown>, ttlSeconds: number): string {
    const body = Buffer.from(
      JSON.stringify({ ...claims, exp: Math.floor(Date.now() / 1000) + ttlSeconds }),
    ).toString('base64url');
    return `${body}.${createHmac('sha256', this.key).update(body).digest('base64url')}`;
  }

  /** verify returns the claims of a genuine, unexpired token, or throws `not-authenticated/invalid-credentials`. */
  verify<T>(token: string): T {
    const bad = (why: string) => new GatewayError('not-authenticated/invalid-credentials', why);
    const dot = token.indexOf('.');
    if (dot < 1 || token.length > 4096) throw bad('Invalid signed URL');
    const body = token.slice(0, dot);
    const given = Buffer.from(token.slice(dot + 1), 'base64url');
    const expected = createHmac('sha256', this.key).update(body).digest();
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      throw bad('Invalid signed URL');
    let claims: { exp?: number };
    try {
      claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as { exp?: number };
    } catch {
      throw bad('Invalid signed URL');
    }
    if (typeof claims.exp !== 'number' || claims.exp * 1000 < Date.now())
      throw bad('This signed URL has expired');
    return claims as T;
  }
}
