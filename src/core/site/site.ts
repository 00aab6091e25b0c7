/**
 * The Site admin page's facts (GET /site, an extension; site admins only): what this gateway runs —
 * its listeners and their bound ports, the storage and database kinds, its version, the instances
 * seen — and the problems an operator should fix, from the same checks `svc-gateway doctor` runs
 * (./checks.ts) plus one only a running gateway can make: the bootstrap site admin still signing in
 * with the password of the first start.
 */
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DatabaseKind } from '../../db/database.ts';
import { UserEntity, type UserRow } from '../../db/entities.ts';
import { verifyPassword } from '../accounts/passwords.ts';
import { requireSiteAdmin } from '../access/guards.ts';
import type { Connections } from '../connections/connections.ts';
import type { CoreContext } from '../context.ts';
import type { Principal } from '../principal.ts';
import { readCertificate, settingsChecks, type CertificateFacts } from './checks.ts';

/** LISTENERS are the front ends, by the name main.ts binds them under, with what each serves. */
const LISTENERS = [
  { name: 'https', serves: 'REST API and web interface (HTTPS)' },
  { name: 'webdav', serves: 'WebDAV (HTTPS)' },
  { name: 'ftp', serves: 'FTP with explicit TLS' },
  { name: 'ftps', serves: 'FTP with implicit TLS' },
  { name: 'sftp', serves: 'SFTP' },
] as const;

/** Listener is one front end: on or off, and its port (the bound one once listening). */
export interface Listener {
  name: string;
  serves: string;
  enabled: boolean;
  port: number | null;
}

/** Instance is a gateway process seen serving this site. */
export interface Instance {
  host: string;
  pid: number;
  version: string;
  started_at: Date;
  /** the instance that answered this request */
  current: boolean;
}

/** Problem is something the operator should fix: what was checked, how bad, and what to do, in words. */
export interface Problem {
  check: string;
  severity: 'warn' | 'fail';
  detail: string;
}

/** SiteReport is GET /site's answer. */
export interface SiteReport {
  version: string;
  database: DatabaseKind;
  storage: { kind: 'local' | 's3'; bucket: string | null; endpoint: string | null };
  bind: string;
  public_url: string;
  listeners: Listener[];
  ftp_passive_ports: string;
  ftp_passive_address: string;
  certificate: CertificateFacts | null;
  instances: Instance[];
  problems: Problem[];
  checked_at: Date;
}

const here = path.dirname(fileURLToPath(import.meta.url));

/** VERSION is package.json's, found beside src/ when run from source or dist/src/ when compiled. */
export const VERSION = ((): string => {
  for (const up of ['../../..', '../../../..']) {
    const file = path.resolve(here, up, 'package.json');
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
    if (pkg.name === 'svc-gateway' && pkg.version) return pkg.version;
  }
  return 'unknown';
})();

/** Site answers GET /site for one core. */
export class Site {
  private ports: Record<string, number> = {};
  private readonly startedAt = new Date();
  // The last bcrypt comparison of admin.password, by the hash it was compared with.
  private bootstrapCheck: { hash: string; same: boolean } | null = null;

  constructor(
    private readonly ctx: CoreContext,
    private readonly databaseKind: DatabaseKind,
    private readonly connections: Connections,
  ) {}

  /** listening tells the core the ports its front ends are bound to (main.ts, before `ready`). */
  listening(ports: Record<string, number>): void {
    this.ports = { ...ports };
  }

  /**
   * instancesSeen lists the instances that renewed their row lately (connections.ts), this one
   * always included (its first renewal may not have run yet).
   */
  private async instancesSeen(): Promise<Instance[]> {
    const seen = await this.connections.instances();
    const here = {
      host: os.hostname(),
      pid: process.pid,
      version: VERSION,
      started_at: this.startedAt,
      current: true,
    };
    const others = seen
      .filter((r) => !r.current)
      .map((r) => ({
        host: r.host,
        pid: r.pid,
        version: r.version,
        started_at: r.started_at,
        current: false,
      }));
    return [here, ...others];
  }

  /** report is what runs and what to fix (site admins only). */
  async report(p: Principal): Promise<SiteReport> {
    requireSiteAdmin(p);
    const { config } = this.ctx;
    const listeners = LISTENERS.map(({ name, serves }) => {
      const setting = config.ports[name];
      return {
        name,
        serves,
        enabled: setting !== null,
        port: setting === null ? null : (this.ports[name] ?? setting),
      };
    });
    const https = listeners[0]!.port;
    const problems: Problem[] = settingsChecks(config, https).flatMap((c) =>
      c.verdict === 'ok' ? [] : [{ check: c.name, severity: c.verdict, detail: c.detail }],
    );
    const admin = await this.bootstrapAdminProblem();
    if (admin) problems.push(admin);
    const s3 = config.storage.kind === 's3';
    return {
      version: VERSION,
      database: this.databaseKind,
      storage: {
        kind: config.storage.kind,
        bucket: s3 ? config.storage.s3.bucket : null,
        endpoint: s3 ? config.storage.s3.endpoint || null : null,
      },
      bind: config.bind,
      public_url: config.public_url,
      listeners,
      ftp_passive_ports: `${config.ports.ftp_pasv.first}-${config.ports.ftp_pasv.last}`,
      ftp_passive_address: config.ftp.passive_address,
      certificate: readCertificate(config),
      instances: await this.instancesSeen(),
      problems,
      checked_at: new Date(),
    };
  }

  /**
   * bootstrapAdminProblem tells whether the site admin made at the first start (users.ts
   * bootstrapAdmin: the first user, named admin.username) still has that start's password. With
   * admin.password (SVC_ADMIN_PASSWORD) set, that is a bcrypt comparison; with a generated one,
   * which is not kept, the account not changed since its creation (updated_at) says so. No column
   * records when a password changed, so an account edited otherwise is not flagged.
   */
  private async bootstrapAdminProblem(): Promise<Problem | null> {
    const { config } = this.ctx;
    const first: UserRow | null = await this.ctx.db.read(
      async (em) => (await em.find(UserEntity, { order: { id: 'ASC' }, take: 1 }))[0] ?? null,
    );
    if (!first?.site_admin || first.username_key !== config.admin.username.toLowerCase()) return null;
    const fix = `change it (Users, ${first.username}, Reset password)`;
    if (config.admin.password) {
      const hash = first.password_hash ?? '';
      if (this.bootstrapCheck?.hash !== hash)
        this.bootstrapCheck = {
          hash,
          same: await verifyPassword(
            config.admin.password,
            first.password_hash,
            config.accounts.bcrypt_rounds,
          ),
        };
      if (!this.bootstrapCheck.same) return null;
      return {
        check: 'admin password',
        severity: 'warn',
        detail: `the site admin ${first.username} still signs in with the password set by admin.password (SVC_ADMIN_PASSWORD) at the first start: ${fix}, then remove SVC_ADMIN_PASSWORD from the settings`,
      };
    }
    if (first.updated_at.getTime() !== first.created_at.getTime()) return null;
    return {
      check: 'admin password',
      severity: 'warn',
      detail: `the site admin ${first.username} still has the password generated and printed at the first start (the account has not been changed since): ${fix}`,
    };
  }
}
