/**
 * The FTP front end: a listener for plain FTP with explicit TLS (AUTH TLS, `ports.ftp`) or one
 * for implicit TLS (`ports.ftps`), each with one TLS SecureContext shared by its control and data
 * connections, so a data connection can resume its control connection's TLS session (the
 * certificate is the HTTPS one). Every connection counts against the gateway's connection limits
 * (one over a limit is greeted with 421 and closed) and must log in within the login grace. `stop`
 * stops accepting, says 421 to every idle session at once and to one with a data transfer running
 * once it ends (or `shutdown.grace_seconds` runs out, aborting it), and waits for them to close;
 * it never exits the process.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { FrontEnd } from '../../src/core/index.ts';
import { connectionLimits, type Refusal } from '../shared/limits.ts';
import { listen } from '../shared/listener.ts';
import { acceptProxyProtocol } from '../shared/proxy.ts';
import { FtpConnection, type ServerContext } from './connection.ts';

/** FtpListenerKind is which of the two listeners a front end is. */
export type FtpListenerKind = 'ftp' | 'ftps';

/**
 * ftpFrontEnd serves FTP on `ports.ftp` (plain, AUTH TLS) or, for 'ftps', implicit FTPS on
 * `ports.ftps`. Its name is the settings key, so the gateway reports `ports.ftp`/`ports.ftps`.
 */
export function ftpFrontEnd(kind: FtpListenerKind = 'ftp'): FrontEnd {
  let server: net.Server | null = null;
  const sessions = new Set<FtpConnection>();
  let graceMs = 0;
  return {
    name: kind,
    async start(core, opts) {
      const settings = core.config.ftp;
      graceMs = core.config.shutdown.grace_seconds * 1000;
      const limits = connectionLimits(core);
      const context: ServerContext = {
        core,
        log: core.log.child({ interface: 'ftp', listener: kind }),
        secureContext: tls.createSecureContext({ cert: opts.tls.cert, key: opts.tls.key }),
        data: {
          host: opts.host,
          range: core.config.ports.ftp_pasv,
          requireSessionReuse: settings.require_session_reuse,
          timeoutMs: settings.data_timeout_seconds * 1000,
          activeMode: settings.active_mode,
          // A transfer stalled on backpressure is not idleness at once (a paused client catches
          // up), but one that moved nothing for the idle timeout, or the data timeout if longer, is.
          stallMs: Math.max(settings.idle_timeout_seconds, settings.data_timeout_seconds) * 1000,
          limits,
        },
        limits,
        requireTls: settings.require_tls,
        idleTimeoutMs: settings.idle_timeout_seconds * 1000,
        passiveAddress: settings.passive_address,
      };
      const loginGraceMs = settings.login_grace_seconds * 1000;
      const s = net.createServer((raw) => {
        raw.setNoDelay(true);
        raw.on('error', () => undefined);
        const refuse = (sock: net.Socket, refusal: Refusal) =>
          refuseConnection(sock, refusal, kind === 'ftps' ? context.secureContext : null);
        if (!limits.admitOrRefuse(kind, raw, refuse)) return;
        const socket =
          kind === 'ftps'
            ? new tls.TLSSocket(raw, { isServer: true, secureContext: context.secureContext })
            : raw;
        const connection = new FtpConnection(context, socket, kind === 'ftps');
        sessions.add(connection);
        // Login grace: a connection that has not logged in by then holds a place for nothing.
        const grace = setTimeout(() => {
          if (connection.principal) return;
          connection.reply(421, 'Login grace time exceeded; closing the connection');
          connection.end();
        }, loginGraceMs);
        void connection.closedPromise.then(() => {
          clearTimeout(grace);
          sessions.delete(connection);
        });
        connection.start();
      });
      acceptProxyProtocol(s, core.config.proxy, context.log);
      server = s;
      return { port: await listen(s, opts.port, opts.host) };
    },
    async stop() {
      const s = server;
      if (!s) return;
      server = null;
      const closed = new Promise<void>((resolve) => s.close(() => resolve()));
      let cut: NodeJS.Timeout | undefined;
      const graceOver = new Promise<void>((resolve) => (cut = setTimeout(resolve, graceMs)));
      // A transfer that ends during the drain has its reply (226) before the 421, and its client
      // reads the last bytes of a download before its control connection is closed.
      const finished = async (c: FtpConnection) => {
        await c.transfer?.done;
        await c.data.settled();
      };
      const drain = async (c: FtpConnection) => {
        await Promise.race([finished(c), graceOver]);
        await c.close();
      };
      await Promise.all([...sessions].map(drain));
      clearTimeout(cut);
      await closed;
    },
  };
}

/**
 * refuseConnection answers a connection over a limit as RFC 959 allows a server to greet one it
 * cannot serve: `421` and close (after the TLS handshake on the implicit FTPS port).
 */
function refuseConnection(
  socket: net.Socket,
  refusal: Refusal,
  secureContext: tls.SecureContext | null,
): void {
  const say = (s: net.Socket) => {
    s.end(`421 ${refusal.message}\r\n`);
    // Read what the client still sends, so our close does not reset the reply away.
    s.resume();
  };
  if (!secureContext) return say(socket);
  const secure = new tls.TLSSocket(socket, { isServer: true, secureContext });
  secure.on('error', () => socket.destroy());
  secure.once('secure', () => say(secure));
}
