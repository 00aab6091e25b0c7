/**
 * The gateway process: settings → core (migrated) → site admin on first start → TLS → front ends
 * in order → one `ready` line. `stop` drains every front end at once (each gives running transfers
 * `shutdown.grace_seconds`; one after another the graces would add up), then closes the core.
 */
import { randomBytes } from 'node:crypto';
import { createCore, type Core, type FrontEnd } from './core/index.ts';
import { ConfigError, type Config } from './config.ts';
import type { Logger } from './log.ts';
import { bindsEverywhere, isLoopback, publicHost } from './core/site/checks.ts';
import { loadTls } from './tls.ts';
import { restFrontEnd } from '../protocols/rest/server.ts';
import { webPages } from '../protocols/web/server.ts';
import { readHostKeys, sftpFrontEnd } from '../protocols/sftp/server.ts';
import { ftpFrontEnd } from '../protocols/ftp/server.ts';
import { webdavFrontEnd } from '../protocols/webdav/server.ts';

/** Gateway is a running gateway: its core, the bound ports and a way to stop it. */
export interface Gateway {
  core: Core;
  ports: Record<string, number>;
  stop(): Promise<void>;
}

/** frontEnds lists the listeners with the setting that holds each one's port, in start order. */
function frontEnds(config: Config): { port: number | null; frontEnd: FrontEnd }[] {
  return [
    { port: config.ports.https, frontEnd: restFrontEnd(webPages) },
    { port: config.ports.sftp, frontEnd: sftpFrontEnd() },
    { port: config.ports.ftp, frontEnd: ftpFrontEnd('ftp') },
    { port: config.ports.ftps, frontEnd: ftpFrontEnd('ftps') },
    { port: config.ports.webdav, frontEnd: webdavFrontEnd() },
  ];
}

/** startGateway runs the whole process but signals; tests call it in-process on port 0. */
export async function startGateway(
  config: Config,
  log: Logger,
  opts: { announce?: (line: string) => void } = {},
): Promise<Gateway> {
  if (frontEnds(config).every((f) => f.port === null)) {
    throw new ConfigError(
      'every listener is off (ports.* / SVC_HTTPS_PORT, SVC_WEBDAV_PORT, SVC_FTP_PORT, SVC_FTPS_PORT, SVC_SFTP_PORT): nothing to serve',
    );
  }
  // A host key file that is wrong stops the start before the database is touched.
  if (config.ports.sftp !== null && config.sftp.host_keys.length) readHostKeys(config.sftp.host_keys);
  const core = await createCore(config, log, { serving: true });
  const started: FrontEnd[] = [];
  try {
    const password = config.admin.password || randomBytes(12).toString('base64url');
    const admin = await core.users.bootstrapAdmin(config.admin.username, password);
    if (admin && !config.admin.password) {
      // Printed once: the operator has no other way to learn it.
      (opts.announce ?? console.log)(`Created site admin "${admin.username}" with password: ${password}`);
    } else if (admin) {
      log.info('created site admin', { username: admin.username });
    }
    const tls = await loadTls(config, log);
    const ports: Record<string, number> = {};
    for (const { port, frontEnd } of frontEnds(config)) {
      if (port === null) continue;
      const bound = await frontEnd
        .start(core, { host: config.bind, port, tls })
        .catch((err: unknown) => Promise.reject(cannotListen(config, frontEnd.name, port, err)));
      started.push(frontEnd);
      ports[frontEnd.name] = bound.port;
    }
    if (!config.public_url && ports.https !== undefined)
      config.public_url = `https://127.0.0.1:${ports.https}`;
    warnLoopbackPublicUrl(config, log);
    core.site.listening(ports);
    log.info('ready', { ports, database: core.databaseKind, data_dir: config.data_dir });
    return {
      core,
      ports,
      async stop() {
        // Not ready from now on; a balancer's health check sees it before the listeners close.
        core.drain();
        const unready = config.shutdown.unready_seconds;
        if (unready > 0) {
          log.info('not ready: draining after shutdown.unready_seconds', { seconds: unready });
          await new Promise((resolve) => setTimeout(resolve, unready * 1000));
        }
        await Promise.all(
          started.map((fe) =>
            fe
              .stop()
              .catch((err: unknown) =>
                log.error('stopping front end failed', { frontEnd: fe.name, error: String(err) }),
              ),
          ),
        );
        await core.close();
      },
    };
  } catch (err) {
    for (const fe of started.reverse()) await fe.stop().catch(() => undefined);
    await core.close();
    throw err;
  }
}

/** cannotListen names the setting behind a listener that could not open, and what to do. */
function cannotListen(config: Config, name: string, port: number, err: unknown): Error {
  const code = (err as { code?: string }).code;
  const setting = `ports.${name} (SVC_${name.toUpperCase()}_PORT)`;
  if (code === 'EADDRINUSE')
    return new ConfigError(`setting ${setting}: ${config.bind}:${port} is already in use by another program`);
  if (code === 'EADDRNOTAVAIL')
    return new ConfigError(`setting bind (SVC_BIND): ${config.bind} is not an address of this machine`);
  if (code === 'EACCES')
    return new ConfigError(
      `setting ${setting}: port ${port} needs root or CAP_NET_BIND_SERVICE (ports below 1024)`,
    );
  return err instanceof Error ? err : new Error(String(err));
}

/**
 * warnLoopbackPublicUrl warns at start when the public URL names a loopback address while the
 * listeners bind every address: signed upload and download URLs carry it, so they would work only
 * on this machine while the listeners take clients from anywhere.
 */
export function warnLoopbackPublicUrl(config: Config, log: Logger): void {
  const host = publicHost(config);
  if (host !== null && isLoopback(host) && bindsEverywhere(config)) {
    log.warn('public URL names a loopback address while the listeners bind every address', {
      public_url: config.public_url,
      fix: 'set SVC_PUBLIC_URL (public_url) to the address clients use, e.g. https://files.example.com:8443',
    });
  }
}
