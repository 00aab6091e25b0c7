/**
 * The settings checks an operator should act on, once for both readers: `svc-gateway doctor`
 * (src/doctor.ts) prints them before a start, and the Site admin page (GET /site, ./site.ts) shows
 * those of the running gateway. Each is pure on the settings (and the certificate file it names):
 * the certificate (expiry, names against the public URL), the public URL and the FTP passive
 * address against the listeners.
 */
import { X509Certificate } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ipaddr from 'ipaddr.js';
import type { Config } from '../../config.ts';

/** Verdict is one check's outcome. */
export type Verdict = 'ok' | 'warn' | 'fail';

/** Check is one line of the report: what was checked, the verdict and what it found or what to fix. */
export type Check = { name: string; verdict: Verdict; detail: string };

/** CERT_WARN_DAYS is how soon before its expiry a certificate is worth a warning. */
export const CERT_WARN_DAYS = 21;

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** isLoopback tells whether a host name or address is this machine only. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

/** bindsEverywhere tells whether the listeners take clients on every address. */
export function bindsEverywhere(config: Config): boolean {
  return config.bind === '0.0.0.0' || config.bind === '::';
}

/** publicHost is the host of the public URL, without IPv6 brackets, or null when unset or bad. */
export function publicHost(config: Config): string | null {
  if (!config.public_url) return null;
  try {
    return new URL(config.public_url).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return null;
  }
}

/** certificateFile is the certificate the gateway serves: the operator's, or the generated one (if made yet). */
export function certificateFile(config: Config): { file: string; generated: boolean } {
  if (config.tls.cert) return { file: config.tls.cert, generated: false };
  return { file: path.join(config.data_dir, 'tls', 'cert.pem'), generated: true };
}

/** CertificateFacts is what the served certificate says: its file, whether generated, its dates and names. */
export interface CertificateFacts {
  file: string;
  generated: boolean;
  valid_from: Date;
  valid_until: Date;
  /** the subjectAltName list, or the subject when it has none */
  names: string;
}

/** readCertificate reads the served certificate, or null when there is none (yet) or it is not PEM. */
export function readCertificate(config: Config): CertificateFacts | null {
  const { file, generated } = certificateFile(config);
  try {
    const cert = new X509Certificate(readFileSync(file));
    return {
      file,
      generated,
      valid_from: new Date(cert.validFrom),
      valid_until: new Date(cert.validTo),
      names: cert.subjectAltName ?? cert.subject,
    };
  } catch {
    return null;
  }
}

/** checkCertificate checks the served certificate's dates and that it names the public URL's host. */
export function checkCertificate(config: Config, now = Date.now()): Check[] {
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
  const days = Math.floor((until.getTime() - now) / 86_400_000);
  const renew = generated
    ? `delete ${file} and its key.pem to generate a new one at the next start, or set SVC_TLS_CERT/SVC_TLS_KEY`
    : `renew it and replace ${file} (SVC_TLS_CERT), then restart`;
  if (until.getTime() <= now)
    out.push({
      name: 'certificate',
      verdict: 'fail',
      detail: `${file} expired on ${until.toISOString()}: ${renew}`,
    });
  else if (new Date(cert.validFrom).getTime() > now)
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
    const matches = ipaddr.isValid(host)
      ? cert.checkIP(host) !== undefined
      : cert.checkHost(host) !== undefined;
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

/**
 * checkPublicUrl checks the public URL against the listeners. `httpsPort` is the port HTTPS is
 * bound to when known (a running gateway), else the setting's.
 */
export function checkPublicUrl(config: Config, httpsPort: number | null = config.ports.https): Check {
  if (httpsPort === null)
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
      detail: `public_url (SVC_PUBLIC_URL) names ${host}, a loopback address, while the listeners bind every address (${config.bind}): links work on this machine only; set it to the address clients use, e.g. https://files.example.com:${httpsPort || 443}`,
    };
  const url = new URL(config.public_url);
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  if (httpsPort !== 0 && port !== httpsPort && config.proxy.trusted.length === 0)
    return {
      name: 'public URL',
      verdict: 'warn',
      detail: `public_url (SVC_PUBLIC_URL) names port ${port} but HTTPS listens on ${httpsPort} and no proxy is trusted: right only if something forwards ${port} to ${httpsPort}`,
    };
  return { name: 'public URL', verdict: 'ok', detail: `${config.public_url}` };
}

/** checkPassiveAddress checks what PASV tells FTP clients to connect to. */
export function checkPassiveAddress(config: Config): Check {
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

/** settingsChecks are the checks of the settings alone (no database or store), in report order. */
export function settingsChecks(config: Config, httpsPort: number | null = config.ports.https): Check[] {
  return [...checkCertificate(config), checkPublicUrl(config, httpsPort), checkPassiveAddress(config)];
}
