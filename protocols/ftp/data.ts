/**
 * The data channel of one FTP session: at most one pending passive listener (PASV/EPSV) on a port
 * of the configured range, or an active-mode target (PORT/EPRT, off by default). A transfer
 * command sends 150 first and then waits here for the connection, which must come from the
 * control connection's peer and, under PROT P, resume the control connection's TLS session.
 */
import net from 'node:net';
import tls from 'node:tls';
import { isRefusal, plainAddress, type ConnectionLimits, type Lease } from '../shared/limits.ts';
import { ReplyError } from './errors.ts';

export { plainAddress };

/** DataSettings are what the channel needs from the listener and the settings. */
export interface DataSettings {
  /** the address listeners bind */
  host: string;
  range: { first: number; last: number };
  secureContext: tls.SecureContext;
  requireSessionReuse: boolean;
  timeoutMs: number;
  /**
   * a data connection on which nothing moved this long is cut: a client that vanished without a
   * reset (a dropped network) would otherwise hold the transfer, its socket and its file for good,
   * since the control connection is never idle during a transfer
   */
  stallMs: number;
  activeMode: boolean;
  /** the gateway's limits, which bound the passive listeners one user holds at once */
  limits: ConnectionLimits;
}

/** DataChannel opens the data connections of one control connection. */
export class DataChannel {
  private listener: net.Server | null = null;
  /** the pending listener's place among its user's passive listeners */
  private listenerLease: Lease | null = null;
  /** whose passive listeners this session's count among (set at login; PASV needs a login) */
  owner: string | null = null;
  /** a connection that arrived before the transfer command took it */
  private early: net.Socket | null = null;
  private onAccept: ((socket: net.Socket) => void) | null = null;
  private target: { host: string; port: number } | null = null;
  /** the socket of the transfer in progress, so ABOR and close can cut it */
  private current: net.Socket | null = null;
  /** sockets of ended transfers whose client has not yet closed its end (see finished) */
  private readonly closing = new Set<net.Socket>();
  /**
   * lost tells whether the data connection of the transfer in progress broke: reset, or closed
   * before its end was read (upload) or everything was sent (download).
   */
  lost = false;

  constructor(
    private readonly settings: DataSettings,
    /** the control connection's client address, the address data connections come from */
    private readonly peer: string,
    /** the trusted proxy the control connection came through, which may relay them too */
    private readonly proxy: string | null = null,
  ) {}

  /** listen opens the session's one passive listener (releasing any earlier one) and returns its port. */
  async listen(): Promise<number> {
    this.release();
    // One user's sessions together hold a bounded share of the range (issue 12: 110 sessions of
    // one user took every port, and every other user got 425).
    const lease = this.owner === null ? null : this.settings.limits.holdPassive(this.owner);
    if (lease && isRefusal(lease)) {
      this.settings.limits.refused('ftp', plainAddress(this.peer), lease, { user: this.owner });
      throw new ReplyError(425, lease.message);
    }
    const { first, last } = this.settings.range;
    const count = last - first + 1;
    // A random start spreads sessions over the range; EADDRINUSE moves on, so ports taken by other
    // sessions, the other listener or another process are skipped without shared state.
    const start = Math.floor(Math.random() * count);
    for (let i = 0; i < count; i++) {
      const port = first + ((start + i) % count);
      const server = net.createServer({ pauseOnConnect: true });
      const bound = await new Promise<boolean>((resolve) => {
        server.once('error', () => resolve(false));
        server.listen({ port, host: this.settings.host, exclusive: true }, () => resolve(true));
      });
      if (!bound) continue;
      server.on('error', () => this.release());
      server.on('connection', (socket) => this.accepted(server, socket));
      this.listener = server;
      this.listenerLease = lease;
      return port;
    }
    lease?.release();
    throw new ReplyError(425, 'No passive port is free; try again later');
  }

  /** setActive records the client's address for PORT/EPRT; the peer must be the control peer. */
  setActive(host: string, port: number): void {
    if (!this.settings.activeMode)
      throw new ReplyError(502, 'Active mode is disabled on this server; use PASV or EPSV');
    if (plainAddress(host) !== plainAddress(this.peer))
      throw new ReplyError(504, 'The data address must be the address of the control connection');
    if (port < 1024 || port > 65535) throw new ReplyError(504, 'The data port must be from 1024 to 65535');
    this.release();
    this.target = { host: plainAddress(host), port };
  }

  /** ready tells whether a transfer command has a data connection to wait for. */
  get ready(): boolean {
    return this.listener !== null || this.early !== null || this.target !== null;
  }

  private accepted(server: net.Server, socket: net.Socket): void {
    // Only the control connection's peer may use the port (ftp-srv's check, kept: FTP bounce and
    // port-stealing attacks); a stranger is cut and the port stays open for the client.
    const from = plainAddress(socket.remoteAddress);
    if (from !== plainAddress(this.peer) && from !== this.proxy) {
      socket.destroy();
      return;
    }
    // One connection per PASV: the port is released as soon as it has one.
    server.close();
    if (this.listener === server) this.closeListener();
    socket.on('error', () => undefined);
    if (this.onAccept) this.onAccept(socket);
    else {
      this.early?.destroy();
      this.early = socket;
      socket.once('close', () => {
        if (this.early === socket) this.early = null;
      });
    }
  }

  /**
   * open waits for (or, in active mode, makes) the data connection, then starts TLS on it when
   * `protect` is set. Call it after sending 150: lftp and FileZilla open the connection, or start
   * its TLS handshake, only after the 150.
   */
  async open(protect: boolean, signal: AbortSignal): Promise<net.Socket> {
    this.lost = false;
    let raw: net.Socket;
    try {
      raw = await this.connect(signal);
    } finally {
      this.onAccept = null;
    }
    this.current = raw;
    if (!protect) return this.watch(raw);
    const secure = new tls.TLSSocket(raw, { isServer: true, secureContext: this.settings.secureContext });
    this.current = secure;
    secure.on('error', () => undefined);
    await this.within(signal, raw, (resolve, reject) => {
      secure.once('secure', resolve);
      secure.once('error', reject);
      secure.once('close', () => reject(new ReplyError(425, 'The data connection closed during TLS setup')));
    });
    if (this.settings.requireSessionReuse && !secure.isSessionReused()) {
      secure.destroy();
      throw new ReplyError(425, 'The data connection must resume the TLS session of the control connection');
    }
    return this.watch(secure);
  }

  /** watch sets `lost` when the transfer's socket breaks before the transfer finished with it. */
  private watch(socket: net.Socket): net.Socket {
    socket.setTimeout(this.settings.stallMs, () => socket.destroy());
    socket.once('error', () => (this.lost ||= this.current === socket));
    socket.once('close', () => {
      const early = !socket.readableEnded && !socket.writableFinished;
      this.lost ||= this.current === socket && early;
    });
    return socket;
  }

  private async connect(signal: AbortSignal): Promise<net.Socket> {
    if (this.target) {
      const { host, port } = this.target;
      this.target = null;
      const socket = net.connect({ host, port });
      socket.on('error', () => undefined);
      await this.within(signal, socket, (resolve, reject) => {
        socket.once('connect', resolve);
        socket.once('error', () =>
          reject(new ReplyError(425, `Cannot open a data connection to port ${port}`)),
        );
      });
      return socket;
    }
    if (this.early) {
      const socket = this.early;
      this.early = null;
      return socket;
    }
    if (!this.listener) throw new ReplyError(425, 'Use PASV or EPSV first');
    let socket: net.Socket | null = null;
    await this.within(signal, null, (resolve) => {
      this.onAccept = (s) => {
        socket = s;
        resolve();
      };
    });
    return socket!;
  }

  /** within runs a wait bounded by the data timeout and the transfer's signal; `socket` is cut on failure. */
  private within(
    signal: AbortSignal,
    socket: net.Socket | null,
    wait: (resolve: () => void, reject: (err: Error) => void) => void,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      // The wait's listeners outlive it (a data socket's 'close' after its TLS handshake): once
      // settled, a late failure must not release the channel, by then the next transfer's.
      let settled = false;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        socket?.destroy();
        this.release();
        reject(err);
      };
      const onAbort = () => fail(new ReplyError(426, 'Transfer aborted'));
      const timer = setTimeout(
        () => fail(new ReplyError(425, 'No data connection was established in time')),
        this.settings.timeoutMs,
      );
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      wait(() => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, fail);
    });
  }

  /** release closes the pending listener, a waiting connection and the current data socket. */
  release(): void {
    this.closeListener();
    this.early?.destroy();
    this.early = null;
    this.target = null;
    this.current?.destroy();
    this.current = null;
  }

  /** closeListener closes the pending passive listener and gives back its place. */
  private closeListener(): void {
    this.listener?.close();
    this.listener = null;
    this.listenerLease?.release();
    this.listenerLease = null;
  }

  /**
   * finished closes the data connection of a transfer that ended normally. Every data connection
   * is accepted paused (pauseOnConnect), and a download only writes: its socket would never read
   * the client's FIN and would stay open in the process for good (issue 19, one descriptor per
   * RETR and listing). So the socket is ended and read to its end, which completes the close;
   * a client that never closes is cut after the data timeout, time enough to read what was sent.
   * Nothing unread is left on the socket then, so the cut never resets data in flight.
   */
  finished(): void {
    const socket = this.current;
    this.current = null;
    if (!socket || socket.destroyed) return;
    const grace = setTimeout(() => socket.destroy(), this.settings.timeoutMs);
    this.closing.add(socket);
    socket.once('close', () => {
      clearTimeout(grace);
      this.closing.delete(socket);
    });
    // A download's pipeline has ended it already (a second end() builds an error to throw away).
    if (!socket.writableEnded) socket.end();
    socket.resume();
  }

  /**
   * settled resolves once the client has closed every data connection of an ended transfer. A
   * download's 226 goes out when its last bytes are in the kernel's buffers, which on a fast link
   * hold megabytes the client has not read yet; a drain that closed the control connection then
   * would fail the download in the client's eyes (lftp retries it, against a closed port).
   */
  async settled(): Promise<void> {
    for (const socket of [...this.closing])
      if (!socket.closed) await new Promise((resolve) => socket.once('close', resolve));
  }
}
