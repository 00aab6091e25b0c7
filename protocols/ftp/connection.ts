/**
 * One FTP control connection: a line-buffered command loop (CRLF or bare LF, a maximum line
 * length, UTF-8 decoded on whole lines), the session's state, and the replies. Commands run one at
 * a time; a transfer runs beside the loop, so ABOR, STAT and NOOP are answered while it runs and
 * other commands wait for it.
 *
 * Ordering (the rule every front end keeps, see protocols/sftp/order.ts): a command takes effect
 * after every command the client sent before it on this connection, because the loop runs them in
 * turn and a transfer commits before its 226. Across connections (lftp mirror -P, FileZilla's
 * parallel transfers) a client orders its own work by waiting for replies, and a reply is only
 * sent once the change is committed.
 */
import type net from 'node:net';
import tls from 'node:tls';
import type { Core, FileSession, LiveConnection, Principal } from '../../src/core/index.ts';
import { GatewayError, resolveChroot } from '../../src/core/index.ts';
import type { Logger } from '../../src/log.ts';
import { clientAddress } from '../shared/proxy.ts';
import { access, errorType, sessionId, transferred, type Direction } from '../shared/observe.ts';
import { liveTransfer, openPresence } from '../shared/presence.ts';
import { isRefusal, userKey, type ConnectionLimits, type Lease } from '../shared/limits.ts';
import { commands } from './commands/index.ts';
import { DataChannel, plainAddress, type DataSettings } from './data.ts';
import { replyForUnknown, ReplyError, type FtpReply } from './errors.ts';

/** MAX_LINE is the longest command line accepted, in bytes (a 550-character path in 4-byte UTF-8 fits). */
export const MAX_LINE = 4096;

/** ServerContext is what every connection of one listener shares. */
export interface ServerContext {
  core: Core;
  log: Logger;
  secureContext: tls.SecureContext;
  data: Omit<DataSettings, 'secureContext'>;
  /** the gateway's connection limits (sessions per user, passive listeners per user) */
  limits: ConnectionLimits;
  requireTls: boolean;
  idleTimeoutMs: number;
  /** the IPv4 address PASV names ('' for the control connection's local address) */
  passiveAddress: string;
}

/** transferDirection tells which commands transfer a file, and which way (listings are not transfers). */
const transferDirection: Record<string, Direction | undefined> = { RETR: 'out', STOR: 'in', APPE: 'in' };

/** Transfer is the data transfer in progress: ABOR aborts it, STAT reports it. */
export interface Transfer {
  command: string;
  path: string;
  bytes: number;
  /** measure counts the bytes instead of `bytes` when their destination counts them (a download) */
  measure?: () => number;
  /** the id of the command that started it */
  requestId?: string;
  controller: AbortController;
  done: Promise<void>;
}

/** transferBytes is how many bytes `t` has moved so far. */
export function transferBytes(t: Transfer): number {
  return t.measure?.() ?? t.bytes;
}

/** Command is one FTP command's handler and when it may run. */
export interface Command {
  run(c: FtpConnection, arg: string): Promise<void> | void;
  /** allowed before login (RFC 959 and RFC 4217 session setup) */
  public?: boolean;
  /** answered while a transfer runs instead of waiting for it */
  midTransfer?: boolean;
  /** the argument is required (501 without it) */
  needsArg?: boolean;
}

const decoder = new TextDecoder('utf-8', { fatal: true });

/** FtpConnection is one client's control connection and session state. */
export class FtpConnection {
  socket: net.Socket;
  readonly peer: string;
  log: Logger;
  readonly data: DataChannel;
  /** the name given by USER, waiting for PASS */
  username: string | null = null;
  principal: Principal | null = null;
  private fileSession: FileSession | null = null;
  /** this login's place among its user's sessions */
  private sessionLease: Lease | null = null;
  /** this session's row among the site's live connections (after login) */
  private presence: LiveConnection | null = null;
  /** the working directory relative to the user's root ('' is `/`) */
  cwd = '';
  /** the offset REST set for the next RETR or STOR */
  restOffset = 0;
  /** the path RNFR named, for the next RNTO */
  renameFrom: string | null = null;
  /** PROT: whether data connections use TLS */
  protectData: boolean;
  pbsz = false;
  /** EPSV ALL was sent: only EPSV may set up data connections (RFC 2428) */
  epsvAll = false;
  transfer: Transfer | null = null;
  /** this control connection's id in log lines; its commands' request ids are `<session>.<n>` */
  readonly session = sessionId();
  private commandsRun = 0;
  /** the code of the last reply sent, for the command's access line */
  private lastCode = 0;
  /** the SPEC error type a command answered without throwing (PASS maps its own), for its access line */
  answeredError: string | undefined;
  /** the algorithm HASH answers with (OPTS HASH) */
  hashAlgo: 'MD5' | 'CRC32' = 'MD5';
  private buffer: Buffer = Buffer.alloc(0);
  private overlong = false;
  private readonly queue: string[] = [];
  private running = false;
  private closed = false;
  /** closedPromise resolves when the control connection is gone */
  readonly closedPromise: Promise<void>;
  private resolveClosed: () => void = () => undefined;
  private onData = (chunk: Buffer) => this.receive(chunk);

  constructor(
    readonly server: ServerContext,
    socket: net.Socket,
    /** the control connection is TLS from the start (implicit FTPS) */
    readonly implicitTls: boolean,
  ) {
    this.socket = socket;
    this.peer = clientAddress(socket);
    this.log = server.log.child({ interface: 'ftp', session: this.session, ip: this.peer });
    // Behind a trusted proxy the passive range is forwarded too (without a PROXY header), so data
    // connections come from the client or from that proxy.
    const proxy = plainAddress(socket.remoteAddress);
    this.data = new DataChannel(
      { ...server.data, secureContext: server.secureContext },
      this.peer,
      proxy === this.peer ? null : proxy,
    );
    // Implicit FTPS clients expect protected data without PROT P (FileZilla, curl send it anyway).
    this.protectData = implicitTls;
    this.closedPromise = new Promise((resolve) => (this.resolveClosed = resolve));
    this.attach(socket);
  }

  /** core is the gateway's core. */
  get core(): Core {
    return this.server.core;
  }

  /** tls tells whether the control connection is encrypted. */
  get tls(): boolean {
    return this.socket instanceof tls.TLSSocket;
  }

  /** files is the logged-in user's FileSession (the caller has checked the login). */
  get files(): FileSession {
    if (!this.fileSession) throw new ReplyError(530, 'Please log in with USER and PASS');
    return this.fileSession;
  }

  /**
   * loggedIn records a successful login, or refuses it with `rate-limited/…` (PASS answers 530 and
   * closes the connection) when the user already has as many sessions as `max_sessions_per_user`.
   */
  loggedIn(principal: Principal): void {
    const lease = this.server.limits.openSession(userKey(principal));
    if (isRefusal(lease)) {
      this.server.limits.refused('ftp', this.peer, lease, { user: principal.user?.username });
      throw new GatewayError('rate-limited/too-many-concurrent-requests', lease.message);
    }
    // The connection may have closed while the gate was checking the password.
    if (this.closed) lease.release();
    else this.sessionLease = lease;
    this.data.owner = userKey(principal);
    this.principal = principal;
    this.fileSession = this.core.files.session(principal);
    this.log = this.log.child({ user: principal.user?.username });
    if (!this.closed)
      this.presence = openPresence(this.core, principal, this.peer, () => this.endByRequest());
  }

  /** endByRequest closes the session because someone ended the connection (Connections). */
  private endByRequest(): void {
    if (this.closed) return;
    this.transfer?.controller.abort();
    this.reply(421, 'Your connection was ended by an administrator');
    this.end();
  }

  /** resolve turns a client path into the session path (relative to the user's root), like a chroot. */
  resolve(arg: string): string {
    return resolveChroot(this.cwd, arg);
  }

  /** start greets the client. */
  start(): void {
    this.reply(220, 'svc-gateway FTP server ready');
  }

  private attach(socket: net.Socket): void {
    socket.on('data', this.onData);
    socket.on('error', (err) => this.log.debug('control connection error', { error: String(err) }));
    socket.on('close', () => this.teardown());
    this.watchIdle(socket);
  }

  /**
   * watchIdle starts the idle timer of a control socket. Idle means no command and no transfer:
   * a long upload is not idleness (ftp-srv#387). The listener is a lasting one (setTimeout's
   * callback is a `once`, which a timeout during a transfer would use up), and the timer starts
   * again when a transfer ends (runTransfer), so the session is idle from then on.
   */
  private watchIdle(socket: net.Socket): void {
    socket.on('timeout', this.onIdle);
    socket.setTimeout(this.server.idleTimeoutMs);
  }

  private onIdle = (): void => {
    if (this.transfer) return;
    this.reply(421, 'Idle timeout; closing the connection');
    this.end();
  };

  /** receive buffers bytes and queues every complete line. */
  private receive(chunk: Buffer): void {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    for (;;) {
      const nl = this.buffer.indexOf(0x0a);
      if (nl < 0) {
        if (this.buffer.length > MAX_LINE) {
          // Keep discarding until the end of this line, then answer it once.
          this.overlong = true;
          this.buffer = Buffer.alloc(0);
        }
        break;
      }
      const raw = this.buffer.subarray(0, nl);
      this.buffer = this.buffer.subarray(nl + 1);
      if (this.overlong || raw.length > MAX_LINE) {
        this.overlong = false;
        this.queue.push('\u0000overlong');
        continue;
      }
      this.queue.push(decodeLine(raw));
    }
    void this.pump();
  }

  /** pump runs queued commands one at a time; the mid-transfer ones overtake a running transfer. */
  private async pump(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.queue.length && !this.closed) {
        const line = this.queue[0]!;
        const name = line.split(' ', 1)[0]!.toUpperCase();
        if (this.transfer && !commands[name]?.midTransfer) {
          await this.transfer.done;
          continue;
        }
        this.queue.shift();
        this.socket.setTimeout(this.server.idleTimeoutMs);
        await this.execute(line);
      }
    } finally {
      this.running = false;
    }
  }

  private async execute(line: string): Promise<void> {
    if (line === '\u0000overlong')
      return this.reply(500, `Command line too long (maximum ${MAX_LINE} bytes)`);
    if (line === '\u0000invalid') return this.reply(501, 'The command is not valid UTF-8');
    const space = line.indexOf(' ');
    const name = (space < 0 ? line : line.slice(0, space)).toUpperCase();
    // Everything after the first space, as sent: names may have spaces, quotes and leading dashes.
    const arg = space < 0 ? '' : line.slice(space + 1);
    const command = commands[name];
    if (!command) return this.reply(502, `Command not implemented: ${name.slice(0, 20)}`);
    if (!command.public && !this.principal) return this.reply(530, 'Please log in with USER and PASS');
    if (command.needsArg && arg === '') return this.reply(501, `${name} needs an argument`);
    if (name !== 'RNTO' && name !== 'RNFR') this.renameFrom = null;
    const started = Date.now();
    const requestId = `${this.session}.${++this.commandsRun}`;
    let error: string | undefined;
    try {
      await command.run(this, arg);
    } catch (err) {
      error = errorType(err, (e) => e instanceof ReplyError);
      const reply = replyForUnknown(err, this.log);
      this.reply(reply.code, reply.text);
      if (reply.close) this.end();
    }
    error ??= this.answeredError;
    this.answeredError = undefined;
    access(
      this.core,
      this.log,
      'ftp',
      { status: this.lastCode, failed: this.lastCode >= 400, error },
      {
        request_id: requestId,
        command: name,
        // The password never reaches a log.
        ...(arg && name !== 'PASS' && name !== 'ACCT' ? { arg: arg.slice(0, 1000) } : {}),
        duration_ms: Date.now() - started,
      },
    );
    if (this.transfer && !this.transfer.requestId) this.transfer.requestId = requestId;
    // REST applies to the one command after it.
    if (name !== 'REST') this.restOffset = 0;
  }

  /** reply sends one reply; several lines make a multi-line reply (RFC 959 4.2). */
  reply(code: number, text: string | string[]): void {
    if (this.closed || this.socket.destroyed) return;
    this.lastCode = code;
    const lines = (Array.isArray(text) ? text : [text]).flatMap((t) => t.split(/\r?\n/));
    let out = '';
    if (lines.length === 1) out = `${code} ${lines[0]}\r\n`;
    else {
      out = `${code}-${lines[0]}\r\n`;
      for (const l of lines.slice(1, -1)) out += ` ${l}\r\n`;
      out += `${code} ${lines[lines.length - 1]}\r\n`;
    }
    this.socket.write(out);
  }

  /** replyWith sends a mapped reply and closes the session when the reply says so. */
  send(reply: FtpReply): void {
    this.reply(reply.code, reply.text);
    if (reply.close) this.end();
  }

  /**
   * upgrade starts TLS on the control connection after `234` (AUTH TLS). Bytes the client sent
   * after AUTH in plain text are dropped, so none can be injected into the secure session.
   */
  upgrade(): void {
    const raw = this.socket;
    raw.off('data', this.onData);
    raw.pause();
    raw.setTimeout(0);
    raw.off('timeout', this.onIdle);
    this.buffer = Buffer.alloc(0);
    this.queue.length = 0;
    raw.write('234 AUTH TLS successful\r\n', () => {
      if (this.closed) return;
      const secure = new tls.TLSSocket(raw, { isServer: true, secureContext: this.server.secureContext });
      this.socket = secure;
      secure.on('data', this.onData);
      secure.on('close', () => this.teardown());
      secure.on('error', (err) => {
        this.log.debug('TLS error on the control connection', { error: String(err) });
        secure.destroy();
      });
      this.watchIdle(secure);
    });
  }

  /**
   * runTransfer runs `work` beside the command loop: ABOR or a lost control connection aborts its
   * signal; the loop waits for it before the next ordinary command.
   */
  runTransfer(command: string, path: string, work: (t: Transfer) => Promise<void>): void {
    const controller = new AbortController();
    const transfer: Transfer = { command, path, bytes: 0, controller, done: Promise.resolve() };
    const started = Date.now();
    let failed: { error: string | undefined } | null = null;
    const way = transferDirection[command];
    const live =
      way && this.presence
        ? liveTransfer(this.presence, `/${path}`, way, () => transferBytes(transfer))
        : null;
    transfer.done = (async () => {
      try {
        await work(transfer);
      } catch (err) {
        failed = { error: errorType(err, (e) => e instanceof ReplyError || controller.signal.aborted) };
        // A client that closes the data connection early (curl with a range, a cancelled
        // download) is not a server error: 426, as for ABOR, and nothing logged.
        const lost = this.data.lost && !(err instanceof ReplyError);
        this.data.release();
        const reply =
          controller.signal.aborted || lost
            ? { code: 426, text: 'Connection closed; transfer aborted' }
            : replyForUnknown(err, this.log);
        this.reply(reply.code, reply.text);
      } finally {
        const direction = transferDirection[command];
        if (direction)
          transferred(this.core, this.log, 'ftp', {
            direction,
            path: `/${path}`,
            bytes: transferBytes(transfer),
            started,
            ok: failed === null,
            request_id: transfer.requestId,
            error: (failed as { error: string | undefined } | null)?.error,
          });
        live?.end();
        this.data.finished();
        this.transfer = null;
        if (!this.closed) this.socket.setTimeout(this.server.idleTimeoutMs);
      }
    })();
    this.transfer = transfer;
    void transfer.done.then(() => this.pump());
  }

  /** end closes the control connection after the replies already written. */
  end(): void {
    if (this.closed) return;
    this.socket.end();
    setTimeout(() => this.socket.destroy(), 2000).unref();
  }

  /** close ends the session for shutdown: abort any transfer, say 421, and wait until it is gone. */
  async close(): Promise<void> {
    if (!this.closed) {
      this.transfer?.controller.abort();
      this.reply(421, 'Server shutting down; closing the connection');
      this.end();
    }
    await this.closedPromise;
  }

  private teardown(): void {
    if (this.closed) return;
    this.closed = true;
    this.resolveClosed();
    this.sessionLease?.release();
    this.presence?.close();
    // A lost control connection discards an upload in progress (DESIGN.md "Uploads").
    this.transfer?.controller.abort();
    this.data.release();
  }
}

/**
 * decodeLine strips the line end and Telnet commands (IAC IP/DM that clients put before ABOR) and
 * decodes UTF-8; invalid UTF-8 becomes a marker the loop answers with 501.
 */
function decodeLine(raw: Buffer): string {
  let end = raw.length;
  if (end > 0 && raw[end - 1] === 0x0d) end--;
  let bytes = raw.subarray(0, end);
  if (bytes.includes(0xff)) {
    // 0xFF never occurs in UTF-8: it is always Telnet IAC; drop it with its command byte.
    const out: number[] = [];
    for (let i = 0; i < bytes.length; i++) {
      if (bytes[i] === 0xff) {
        if ((bytes[i + 1] ?? 0) >= 0xf0) i++;
        continue;
      }
      if (bytes[i] === 0xf2 && out.length === 0) continue; // Telnet DM sent as urgent data
      out.push(bytes[i]!);
    }
    bytes = Buffer.from(out);
  }
  try {
    return decoder.decode(bytes);
  } catch {
    return '\u0000invalid';
  }
}
