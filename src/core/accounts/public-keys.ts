/**
 * SSH public keys (the hosted service's "PublicKey"): a user logs in over SFTP with any of their
 * keys. Keys are validated and stored in OpenSSH's one-line form (`type base64 comment`), with the
 * SHA256 fingerprint OpenSSH prints. The core parses the line itself (a few length-prefixed
 * fields): Node's crypto reads no OpenSSH public keys, and the core must not import ssh2.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { PublicKeyEntity, UserEntity, type PublicKeyRow } from '../../db/entities.ts';
import { requireFullKey } from '../access/guards.ts';
import { recordAction } from '../actions/record.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError, modelSaveError } from '../errors.ts';
import type { Page, PageRequest } from '../pagination.ts';
import { isSiteAdmin, type Principal } from '../principal.ts';
import { int, parseFields, text } from '../validation.ts';

/** PublicKey is a key as the API shows it. */
export interface PublicKey {
  id: number;
  title: string;
  public_key: string;
  fingerprint: string;
  created_at: Date;
  user_id: number;
}

/** ParsedKey is a validated OpenSSH public key. */
export interface ParsedKey {
  type: string;
  /** the key blob (SSH wire format), what a client presents at login */
  blob: Buffer;
  /** `type base64`, without the comment */
  line: string;
  comment: string;
  fingerprint: string;
}

// Modern key types only; ssh-dss is gone from OpenSSH's defaults and is refused here too.
const ecdsaCurves: Record<string, string> = {
  'ecdsa-sha2-nistp256': 'nistp256',
  'ecdsa-sha2-nistp384': 'nistp384',
  'ecdsa-sha2-nistp521': 'nistp521',
};
const MIN_RSA_BITS = 2048;

/** fingerprintOf is OpenSSH's `SHA256:<base64 without padding>` of a key blob. */
export function fingerprintOf(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/** readFields splits an SSH wire-format blob into its length-prefixed strings, or null if malformed. */
function readFields(blob: Buffer): Buffer[] | null {
  const out: Buffer[] = [];
  let at = 0;
  while (at < blob.length) {
    if (at + 4 > blob.length) return null;
    const len = blob.readUInt32BE(at);
    if (at + 4 + len > blob.length) return null;
    out.push(blob.subarray(at + 4, at + 4 + len));
    at += 4 + len;
  }
  return out;
}

/** parsePublicKey validates one OpenSSH public key line and returns its parts, or a problem. */
export function parsePublicKey(input: string): ParsedKey | { problem: string } {
  const parts = input.trim().split(/\s+/);
  if (parts.length < 2 || !parts[0] || !parts[1])
    return { problem: 'must be an OpenSSH public key line: type base64 [comment]' };
  const [type, b64, ...rest] = parts as [string, string, ...string[]];
  if (!(type === 'ssh-ed25519' || type === 'ssh-rsa' || type in ecdsaCurves))
    return { problem: `has an unsupported key type ${type.slice(0, 40)}` };
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) return { problem: 'is not valid base64' };
  const blob = Buffer.from(b64, 'base64');
  const fields = readFields(blob);
  if (!fields || fields[0]?.toString('latin1') !== type)
    return { problem: 'does not hold a key of the type it names' };
  if (type === 'ssh-ed25519') {
    if (fields.length !== 2 || fields[1]!.length !== 32) return { problem: 'is not a valid Ed25519 key' };
  } else if (type === 'ssh-rsa') {
    const n = fields[2];
    if (fields.length !== 3 || !n || fields[1]!.length === 0) return { problem: 'is not a valid RSA key' };
    const bits = (n.length - (n[0] === 0 ? 1 : 0)) * 8;
    if (bits < MIN_RSA_BITS) return { problem: `is an RSA key under ${MIN_RSA_BITS} bits` };
  } else if (
    fields.length !== 3 ||
    fields[1]!.toString('latin1') !== ecdsaCurves[type] ||
    fields[2]![0] !== 0x04
  ) {
    return { problem: 'is not a valid ECDSA key' };
  }
  const line = `${type} ${blob.toString('base64')}`;
  return { type, blob, line, comment: rest.join(' '), fingerprint: fingerprintOf(blob) };
}

/** publicKeyCreateSchema is what POST /public_keys accepts. */
export const publicKeyCreateSchema = z.object({
  user_id: int.optional(),
  title: text(100).optional(),
  public_key: text(16384),
});
/** publicKeyListSchema is the query GET /public_keys accepts (besides cursor and per_page). */
export const publicKeyListSchema = z.object({ user_id: int.optional() });

/** PublicKeys adds, lists and removes users' SSH public keys. */
export class PublicKeys {
  constructor(private readonly ctx: CoreContext) {}

  /** owner resolves `user_id` (0 or absent: the caller); only site admins name someone else. */
  private owner(p: Principal, userId: number | undefined): number {
    const owner = userId && userId !== 0 ? userId : p.user?.id;
    if (owner === undefined)
      throw modelSaveError({ user_id: ["can't be blank: a site-wide key must name a user"] });
    if (owner !== p.user?.id && !isSiteAdmin(p))
      throw new GatewayError(
        'not-authorized/user-id-without-site-admin',
        "Only site admins manage other users' public keys",
      );
    return owner;
  }

  /** list shows one user's keys (the caller's unless a site admin names `user_id`). */
  async list(p: Principal, req: PageRequest & Record<string, unknown>): Promise<Page<PublicKey>> {
    requireFullKey(p);
    const q = parseFields(publicKeyListSchema, req);
    const owner = this.owner(p, q.user_id);
    const w = this.ctx.paginator.window(`public_keys:${owner}`, req);
    const rows = await this.ctx.db.read((em) =>
      em.find(PublicKeyEntity, {
        where: { user_id: owner },
        order: { id: 'ASC' },
        skip: w.offset,
        take: w.perPage + 1,
      }),
    );
    return this.ctx.paginator.page(w, rows.map(view));
  }

  /** get shows one key of the caller (any key to site admins). */
  async get(p: Principal, id: number): Promise<PublicKey> {
    requireFullKey(p);
    return view(await this.find(p, id));
  }

  private async find(p: Principal, id: number): Promise<PublicKeyRow> {
    const row = await this.ctx.db.read((em) => em.findOneBy(PublicKeyEntity, { id }));
    if (!row || (!isSiteAdmin(p) && row.user_id !== p.user?.id))
      throw new GatewayError('not-found/public-key-not-found', `Public key ${id} not found`);
    return row;
  }

  /** create validates and stores a key for the caller, or for `user_id` when a site admin names one. */
  async create(p: Principal, input: unknown): Promise<PublicKey> {
    requireFullKey(p);
    const data = parseFields(publicKeyCreateSchema, input);
    const owner = this.owner(p, data.user_id);
    const parsed = parsePublicKey(data.public_key);
    if ('problem' in parsed) throw modelSaveError({ public_key: [parsed.problem] });
    return this.ctx.db.work(async (em) => {
      if (!(await em.existsBy(UserEntity, { id: owner })))
        throw modelSaveError({ user_id: ['does not name an existing user'] });
      if (await em.existsBy(PublicKeyEntity, { user_id: owner, fingerprint: parsed.fingerprint }))
        throw modelSaveError({ public_key: ['has already been added for this user'] });
      const title = data.title?.trim() || parsed.comment.slice(0, 100);
      const row = await em.save(
        PublicKeyEntity,
        em.create(PublicKeyEntity, {
          user_id: owner,
          title,
          public_key: parsed.comment ? `${parsed.line} ${parsed.comment}` : parsed.line,
          fingerprint: parsed.fingerprint,
          created_at: new Date(),
        }),
      );
      await recordAction(em, p, {
        action: 'public_key_create',
        display: `Added SSH public key ${parsed.fingerprint}`,
        targets: [{ type: 'public_key', id: row.id, user_id: owner }],
      });
      return view(row);
    });
  }

  /** remove deletes a key (its owner or a site admin). */
  async remove(p: Principal, id: number): Promise<void> {
    requireFullKey(p);
    await this.ctx.db.work(async (em) => {
      const row = await em.findOneBy(PublicKeyEntity, { id });
      if (!row || (!isSiteAdmin(p) && row.user_id !== p.user?.id))
        throw new GatewayError('not-found/public-key-not-found', `Public key ${id} not found`);
      await em.delete(PublicKeyEntity, { id });
      await recordAction(em, p, {
        action: 'public_key_destroy',
        display: `Deleted SSH public key ${row.fingerprint}`,
        targets: [{ type: 'public_key', id, user_id: row.user_id }],
      });
    });
  }
}

function view(r: PublicKeyRow): PublicKey {
  return {
    id: r.id,
    title: r.title,
    public_key: r.public_key,
    fingerprint: r.fingerprint,
    created_at: r.created_at,
    user_id: r.user_id,
  };
}
