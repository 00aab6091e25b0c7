/**
 * `svc-gateway doctor`: checks what an operator gets wrong before clients notice, with the
 * settings a gateway would start with, and says what to fix — the database (reachable, schema
 * current, its clock), the blob store, the certificate (expiry, names against the public URL), the
 * public URL and the FTP passive address against the listeners. One line per check: ok, warn or
 * fail; any fail makes the exit code 1. It starts no listener and changes nothing (a missing SQLite
 * file is created empty, as `serve` would).
 */
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Config } from './config.ts';
import { createBlobStore } from './core/files/blobstores/index.ts';
import { within } from './core/readiness.ts';
import { Database } from './db/database.ts';

/** Verdict is one check's outcome. */
export type Verdict = 'ok' | 'warn' | 'fail';

/** Check is one line of the report: what was checked, the verdict and what it found or what to fix. */
export type Check = { name: string; verdict: Verdict; detail: string };

/** PROBE_TIMEOUT_MS bounds each network check: an unreachable server is a finding, not a hang. */
const PROBE_TIMEOUT_MS = 5_000;
/** CLOCK_WARN_MS and CLOCK_FAIL_MS: instances sharing a database must agree on the time (lockouts, leases, signed URLs). */
const CLOCK_WARN_MS = 2_000;
const CLOCK_FAIL_MS = 30_000;
/** CERT_WARN_DAYS is how soon before its expiry a certificate is worth a warning. */
const CERT_WARN_DAYS = 21;

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** isLoopback tells whether a host name or address is this machine only. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

/** bindsEverywhere tells whether the listeners take clients on every address. */
function bindsEverywhere(config: Config): boolean {
  return config.bind === '0.0.0.0' || config.bind === '::';
}

/** publicHost is the host of the public URL, without IPv6 brackets, or null when unset or bad. */
function publicHost(config: Config): string | null {
  if (!config.public_url) return null;
  try {
    return new URL(config.public_url).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return null;
  }
}

/** checkDatabase opens the database, runs a statement, checks the schema and, on PostgreSQL, the clock. */
async function checkDatabase(config: Config): Promise<Check[]> {
  const setting = config.database.url ? 'database.url (SVC_DATABASE_URL)' : 'data_dir (SVC_DATA_DIR)';
  let db: Database;
  try {
    db = await within(Database.open(config), PROBE_TIMEOUT_MS, 'database');
  } catch (err) {
    return [
      { name: 'database', verdict: 'fail', detail: message(err) },
      { name: 'clock', verdict: 'warn', detail: 'not compared: the database did not answer' },
    ];
  }
  const out: Check[] = [];
  try {
    const local0 = Date.now();
    const { now } = await within(db.ping(), PROBE_TIMEOUT_MS, 'database');
    const local1 = Date.now();
    const pending = await within(db.pendingMigrations(), PROBE_TIMEOUT_MS, 'database');
    const kind = db.kind === 'postgres' ? 'PostgreSQL' : `SQLite in ${config.data_dir}`;
    out.push(
      pending
        ? {
            name: 'database',
            verdict: 'warn',
            detail: `${kind} answers, but its schema is behind this version: run \`svc-gateway migrate\` (serve migrates at start)`,
          }
        : { name: 'database', verdict: 'ok', detail: `${kind} answers; schema up to date` },
    );
    if (now) {
      // The server's time against the middle of the round trip.
      const skew = now.getTime() - (local0 + local1) / 2;
      const ahead = `${Math.abs(skew / 1000).toFixed(1)} s ${skew > 0 ? 'behind' : 'ahead of'} the database server`;
      const verdict: Verdict =
        Math.abs(skew) > CLOCK_FAIL_MS ? 'fail' : Math.abs(skew) > CLOCK_WARN_MS ? 'warn' : 'ok';
      out.push({
        name: 'clock',
        verdict,
        detail:
          verdict === 'ok'
            ? `agrees with the database server's (${ahead})`
            : `this machine's clock is ${ahead}: run NTP (chrony, systemd-timesyncd) here and on the database server; lockouts, leases and signed URLs compare times across instances`,
      });
    } else {
      out.push({
        name: 'clock',
        verdict: 'ok',
        detail: `SQLite: one machine, one clock (now ${new Date().toISOString()}); keep it synchronised (NTP) for signed URLs and webhook signatures`,
      });
    }
  } catch (err) {
    out.push({ name: 'database', verdict: 'fail', detail: `setting ${setting}: ${message(err)}` });
  } finally {
    await db.close().catch(() => undefined);
  }
  return out;
}

/** checkStorage asks the blob store for a blob that does not exist: the store's real read path. */
async function checkStorage(config: Config): Promise<Check> {
  const where =
    config.storage.kind === 's3'
      ? `S3 bucket ${config.storage.s3.bucket}${config.storage.s3.endpoint ? ` at ${config.storage.s3.endpoint}` : ''}`
      : `local store in ${path.join(config.data_dir, 'blobs')}`;
  const settings =
    config.storage.kind === 's3'
      ? 'storage.s3.* (SVC_S3_BUCKET, SVC_S3_ENDPOINT, SVC_S3_REGION, AWS credentials)'
      : 'data_dir (SVC_DATA_DIR)';
  try {
    const store = await createBlobStore(config, config.data_dir);
    try {
      await within(
        (async () => {
          await store.probe?.();
          await store.size('doctor-probe');
        })(),
        PROBE_TIMEOUT_MS,
        'blob store',
      );
      const space = store.space ? await store.space().catch(() => null) : null;
      if (space && space.total > 0 && space.free / space.total < 0.05)
        return {
          name: 'storage',
          verdict: 'warn',
          detail: `${where} answers, but only ${Math.round((space.free / space.total) * 100)}% of its file system is free`,
        };
      return { name: 'storage', verdict: 'ok', detail: `${where} answers` };
    } finally {
      await store.close().catch(() => undefined);
    }
  } catch (err) {
    return { name: 'storage', verdict: 'fail', detail: `${where}: ${message(err)} (settings ${settings})` };
  }
}

/** certificateFile is the certificate the gateway serves: the operator's, or the generated one (if made yet). */
function certificateFile(config: Config): { file: string; generated: boolean } {
  if (config.tls.cert) return { file: config.tls.cert, generated: false };
  return { file: path.join(config.data_dir, 'tls', 'cert.pem'), generated: true };
}

/** checkCertificate checks the served certificate's dates and that it names the public URL's host. */
function checkCertificate(config: Config): Check[] {
  const { file, generated } = certificateFile(config);
  if (!existsSync(file)) {
    return [
      generated
        ? {
            name: 'certificate',
            verdict: 'warn',
            detail: `none yet: the first start generates a self-signed one in ${file}; clients must trust it, or set tls.cert/tls.key (SVC_TLS_CERT, SVC_TLS_KEY)`,
          }
        : {
            name: 'certificate',
            verdict: 'fail',
            detail: `setting tls.cert (SVC_TLS_CERT): file ${file} does not exist`,
          },
    ];
  }
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(readFileSync(file));
  } catch (err) {
    return [
      {
        name: 'certificate',
        verdict: 'fail',
        detail: `setting tls.cert (SVC_TLS_CERT): ${file} is not a PEM certificate (${message(err)})`,
      },
    ];
  }
  const out: Check[] = [];
  const until = new Date(cert.validTo);
  const days = Math.floor((until.getTime() - Date.now()) / 86_400_000);
  const renew = generated
    ? `delete ${file} and its key.pem to generate a new one at the next start, or set SVC_TLS_CERT/SVC_TLS_KEY`
    : `renew it and replace ${file} (SVC_TLS_CERT), then restart`;
  if (until.getTime() <= Date.now())
    out.push({
      name: 'certificate',
      verdict: 'fail',
      detail: `${file} expired on ${until.toISOString()}: ${renew}`,
    });
  else if (new Date(cert.validFrom).getTime() > Date.now())
    out.push({
      name: 'certificate',
      verdict: 'fail',
      detail: `${file} is not valid before ${new Date(cert.validFrom).toISOString()} (is this clock right?)`,
    });
  else if (days < CERT_WARN_DAYS)
    out.push({ name: 'certificate', verdict: 'warn', detail: `${file} expires in ${days} days: ${renew}` });
  else
    out.push({
      name: 'certificate',
      verdict: generated ? 'warn' : 'ok',
      detail: generated
        ? `self-signed (${file}), valid ${days} more days: clients must trust it; set tls.cert/tls.key (SVC_TLS_CERT, SVC_TLS_KEY) for a CA-signed one`
        : `${file} valid ${days} more days`,
    });
  const host = publicHost(config);
  if (host) {
    const matches = net.isIP(host) ? cert.checkIP(host) !== undefined : cert.checkHost(host) !== undefined;
    out.push(
      matches
        ? {
            name: 'certificate names',
            verdict: 'ok',
            detail: `the certificate names ${host}, the public URL's host`,
          }
        : {
            name: 'certificate names',
            verdict: 'fail',
            detail: `the certificate does not name ${host}, the host of public_url (SVC_PUBLIC_URL) (it names ${cert.subjectAltName ?? cert.subject}): clients will refuse it; get one for ${host} or fix SVC_PUBLIC_URL`,
          },
    );
  }
  return out;
}

/** checkPublicUrl checks the public URL against the listeners. */
function checkPublicUrl(config: Config): Check {
  if (config.ports.https === null)
    return { name: 'public URL', verdict: 'ok', detail: 'the HTTPS listener is off: no links are made' };
  if (!config.public_url)
    return {
      name: 'public URL',
      verdict: bindsEverywhere(config) ? 'warn' : 'ok',
      detail: bindsEverywhere(config)
        ? 'public_url (SVC_PUBLIC_URL) is unset: download and upload links will name https://127.0.0.1:<port>, which only this machine can open; set it to the address clients use'
        : `unset: links name https://127.0.0.1:<port> (listeners bind ${config.bind} only)`,
    };
  const host = publicHost(config);
  if (host === null)
    return {
      name: 'public URL',
      verdict: 'fail',
      detail: `public_url (SVC_PUBLIC_URL) ${config.public_url} is not a URL`,
    };
  if (isLoopback(host) && bindsEverywhere(config))
    return {
      name: 'public URL',
      verdict: 'warn',
      detail: `public_url (SVC_PUBLIC_URL) names ${host}, a loopback address, while the listeners bind every address (${config.bind}): links work on this machine only; set it to the address clients use, e.g. https://files.example.com:${config.ports.https || 443}`,
    };
  const url = new URL(config.public_url);
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  if (config.ports.https !== 0 && port !== config.ports.https && config.proxy.trusted.length === 0)
    return {
      name: 'public URL',
      verdict: 'warn',
      detail: `public_url (SVC_PUBLIC_URL) names port ${port} but HTTPS listens on ${config.ports.https} and no proxy is trusted: right only if something forwards ${port} to ${config.ports.https}`,
    };
  return { name: 'public URL', verdict: 'ok', detail: `${config.public_url}` };
}

/** checkPassiveAddress checks what PASV tells FTP clients to connect to. */
function checkPassiveAddress(config: Config): Check {
  if (config.ports.ftp === null && config.ports.ftps === null)
    return { name: 'FTP passive address', verdict: 'ok', detail: 'FTP and FTPS are off' };
  const { first, last } = config.ports.ftp_pasv;
  const range = `passive ports ${first}-${last} (SVC_FTP_PASV_PORTS) must be reachable too`;
  const address = config.ftp.passive_address;
  if (!address)
    return bindsEverywhere(config)
      ? {
          name: 'FTP passive address',
          verdict: 'warn',
          detail: `ftp.passive_address (SVC_FTP_PASV_ADDRESS) is unset: PASV names the address each client connected to, wrong behind NAT or a load balancer; set it to the public IPv4 address; ${range}`,
        }
      : { name: 'FTP passive address', verdict: 'ok', detail: `PASV names ${config.bind}; ${range}` };
  if (isLoopback(address) && !isLoopback(config.bind))
    return {
      name: 'FTP passive address',
      verdict: 'fail',
      detail: `ftp.passive_address (SVC_FTP_PASV_ADDRESS) is ${address}, a loopback address, while the listeners bind ${config.bind}: every client but this machine's fails its transfers; set the address clients reach`,
    };
  return { name: 'FTP passive address', verdict: 'ok', detail: `PASV names ${address}; ${range}` };
}

/** runDoctor runs every check; the database, the store and the rest at once. */
export async function runDoctor(config: Config): Promise<Check[]> {
  const [database, storage] = await Promise.all([checkDatabase(config), checkStorage(config)]);
  return [
    ...database,
    storage,
    ...checkCertificate(config),
    checkPublicUrl(config),
    checkPassiveAddress(config),
  ];
}

/** formatCheck prints one check as a report line: `fail  database: …`. */
export function formatCheck(c: Check): string {
  return `${c.verdict.padEnd(4)}  ${c.name}: ${c.detail}`;
}
