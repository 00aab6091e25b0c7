/**
 * Session commands: login through the core's gate (USER, PASS), TLS on the control connection
 * (AUTH, RFC 4217) and on data connections (PBSZ, PROT), and QUIT.
 */
import { GatewayError } from '../../../src/core/index.ts';
import type { Command, FtpConnection } from '../connection.ts';
import { replyFor, ReplyError } from '../errors.ts';

function requireTls(c: FtpConnection, what: string): void {
  if (!c.tls) throw new ReplyError(503, `${what} needs a TLS connection; send AUTH TLS first`);
}

/** sessionCommands are USER, PASS, AUTH, PBSZ, PROT, CCC, PROXY and QUIT. */
export const sessionCommands: Record<string, Command> = {
  USER: {
    public: true,
    needsArg: true,
    run(c, arg) {
      if (c.principal) throw new ReplyError(503, 'Already logged in');
      if (c.server.requireTls && !c.tls)
        throw new ReplyError(530, 'This server requires TLS: send AUTH TLS before logging in');
      c.username = arg;
      c.reply(331, `Password required for ${arg}`);
    },
  },
  PASS: {
    public: true,
    async run(c, arg) {
      if (c.principal) return c.reply(230, 'Already logged in');
      const username = c.username;
      if (username === null) throw new ReplyError(503, 'Send USER first');
      c.username = null;
      try {
        // The whole gate is the core's: password, ftp_permission, allowed_ips, user_root, lockout,
        // and the login/failedlogin Action.
        c.loggedIn(await c.core.gate.login({ interface: 'ftp', ip: c.peer, username, password: arg }));
      } catch (err) {
        if (!(err instanceof GatewayError)) throw err;
        c.answeredError = err.type;
        const reply = replyFor(err);
        // A limit (failed logins from this address, this user's sessions) is a 530 that closes the
        // connection, not the family's 421: lftp reconnects after a 421 at login up to
        // net:max-retries (1,000) times, and after a 530 only when its text matches ftp:retry-530,
        // which these texts avoid. A login gate that cannot answer stays 421: that one passes.
        if (err.family === 'rate-limited') return c.send({ code: 530, text: reply.text, close: true });
        // Never tell which check failed beyond what the core's message says.
        return c.send({ ...reply, code: reply.code === 421 ? 421 : 530 });
      }
      c.reply(230, 'Logged in');
    },
  },
  AUTH: {
    public: true,
    needsArg: true,
    run(c, arg) {
      // AUTH SSL and TLS-C are older spellings of AUTH TLS that some clients still send.
      if (!['TLS', 'SSL', 'TLS-C', 'TLS-P'].includes(arg.toUpperCase()))
        throw new ReplyError(504, `AUTH ${arg} is not supported; use AUTH TLS`);
      if (c.tls) throw new ReplyError(503, 'The connection already uses TLS');
      c.upgrade();
    },
  },
  PBSZ: {
    public: true,
    needsArg: true,
    run(c) {
      requireTls(c, 'PBSZ');
      c.pbsz = true;
      c.reply(200, 'PBSZ=0');
    },
  },
  PROT: {
    public: true,
    needsArg: true,
    run(c, arg) {
      requireTls(c, 'PROT');
      const level = arg.toUpperCase();
      if (level === 'C' || level === 'P') {
        c.protectData = level === 'P';
        return c.reply(200, `Protection level set to ${level}`);
      }
      if (level === 'S' || level === 'E')
        throw new ReplyError(536, `Protection level ${level} is not supported`);
      throw new ReplyError(504, `Unknown protection level ${arg}`);
    },
  },
  CCC: {
    run() {
      throw new ReplyError(534, 'The control connection stays encrypted');
    },
  },
  PROXY: {
    public: true,
    // A PROXY protocol v1 header read as a command: the listener believes headers only from
    // trusted proxies (SVC_TRUSTED_PROXIES), so this peer is not one. Refused with the connection,
    // as TLS and SSH refuse it; a v2 header's signature holds a QUIT for the same end.
    run(c) {
      c.log.warn('PROXY header from an address that is not a trusted proxy; connection closed');
      c.send({ code: 421, text: 'PROXY header from an untrusted address', close: true });
    },
  },
  QUIT: {
    public: true,
    run(c) {
      c.reply(221, 'Goodbye');
      c.end();
    },
  },
};
