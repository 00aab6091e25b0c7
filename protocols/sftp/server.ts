/**
 * The SFTP front end: ssh2 for the SSH transport (keys, ciphers, authentication, channels), our
 * own SFTP v3 layer (session.ts) on the raw `sftp` subsystem channel. Every login goes through the
 * core's gate (password, keyboard-interactive and public key alike), so `sftp_permission`,
 * `allowed_ips`, `user_root`, lockout and the login Actions are the core's.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import ssh2 from 'ssh2';
import type { AuthContext, Connection, ServerChannel } from 'ssh2';
import { ConfigError } from '../../src/config.ts';
import {
  GatewayError,
  type Core,
  type FrontEnd,
  type LiveConnection,
  type Principal,
} from '../../src/core/index.ts';
import type { Logger } from '../../src/log.ts';
import { RequestBatch, sessionId, transferred, userOf } from '../shared/observe.ts';
import {
  connectionLimits,
  isRefusal,
  plainAddress,
  userKey,
  type ConnectionLimits,
  type Lease,
  type Refusal,
} from '../shared/limits.ts';
import { listen } from '../shared/listener.ts';
import { openPresence } from '../shared/presence.ts';
import { acceptProxyProtocol, clientAddress } from '../shared/proxy.ts';
import { runExec } from './exec.ts';
import { SftpSession } from './session.ts';

const { Server, utils } = ssh2;

/** ALGORITHMS are the modern choices only: no SHA-1, no CBC, no ssh-rsa signatures. */
const ALGORITHMS = {
  kex: [
    'curve25519-sha256',
    'curve25519-sha256@libssh.org',
    'ecdh-sha2-nistp256',
    'ecdh-sha2-nistp384',
    'ecdh-sha2-nistp521',
    'diffie-hellman-group16-sha512',
    'diffie-hellman-group18-sha512',
    'diffie-hellman-group14-sha256',
  ],
  cipher: [
    'aes128-gcm@openssh.com',
    'aes256-gcm@openssh.com',
    'chacha20-poly1305@openssh.com',
    'aes128-ctr',
    'aes192-ctr',
    'aes256-ctr',
  ],
  hmac: ['hmac-sha2-256-etm@openssh.com', 'hmac-sha2-512-etm@openssh.com'],
  serverHostKey: ['ssh-ed25519', 'rsa-sha2-512', 'rsa-sha2-256'],
  compress: ['none', 'zlib@openssh.com'],
} as const;

const AUTH_METHODS = ['publickey', 'password', 'keyboard-interactive'] as const;

/** HOST_KEY_SETTING names the setting of the operator's host key files, as start-up failures say it. */
const HOST_KEY_SETTING = 'sftp.host_keys (SVC_SSH_HOST_KEY)';

/**
 * readHostKeys reads the operator's host key files (sftp.host_keys), one private key of each type,
 * refusing at start, by name, a file that is missing or that ssh2 cannot read as a private key:
 * instances behind one balancer must all show the key their clients pinned.
 */
export function readHostKeys(files: string[]): string[] {
  const types = new Map<string, string>();
  return files.map((file) => {
    if (!existsSync(file)) throw new ConfigError(`setting ${HOST_KEY_SETTING}: file ${file} does not exist`);
    const text = readFileSync(file, 'utf8');
    const parsed = utils.parseKey(text);
    const key = Array.isArray(parsed) ? parsed[0] : parsed;
    if (!key || key instanceof Error || !key.isPrivateKey()) {
      const why = key instanceof Error ? ` (${key.message})` : '';
      throw new ConfigError(
        `setting ${HOST_KEY_SETTING}: file ${file} is not an unencrypted SSH private key in PEM or OpenSSH format${why}`,
      );
    }
    // ssh2 keeps the first key of a type and drops the others without a word.
    const earlier = types.get(key.type);
    if (earlier)
      throw new ConfigError(
        `setting ${HOST_KEY_SETTING}: files ${earlier} and ${file} are both ${key.type} keys; give one of each type`,
      );
    types.set(key.type, file);
    return text;
  });
}

/**
 * loadHostKeys reads the Ed25519 and RSA host keys from `dir`, generating them on first start:
 * clients pin host keys, so they must stay the same across restarts.
 */
export function loadHostKeys(dir: string): string[] {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const specs = [
    { file: 'ssh_host_ed25519_key', make: () => utils.generateKeyPairSync('ed25519') },
    { file: 'ssh_host_rsa_key', make: () => utils.generateKeyPairSync('rsa', { bits: 3072 }) },
  ];
  return specs.map(({ file, make }) => {
    const full = path.join(dir, file);
    if (!existsSync(full)) {
      // About one Ed25519 key in a hundred that ssh2 generates, its own parser refuses
      // ("Malformed OpenSSH private key"; 3 of 300 here): SFTP would then never start, so
      // generate until ssh2 reads the key back.
      let pair = make();
      for (let tries = 1; utils.parseKey(pair.private) instanceof Error; tries++) {
        if (tries === 10) throw new Error(`ssh2 cannot read the ${file} it generated`);
        pair = make();
      }
      writeFileSync(full, pair.private, { mode: 0o600 });
      writeFileSync(`${full}.pub`, `${pair.public}\n`, { mode: 0o644 });
    }
    return readFileSync(full, 'utf8');
  });
}

/** ConnectionState is what one SSH connection knows: who logged in and its sessions. */
interface ConnectionState {
  principal: Principal | null;
  sessions: Set<SftpSession>;
  lastActive: number;
  /** this login's place among its user's sessions */
  lease: Lease | null;
  /** this login's row among the site's live connections */
  presence: LiveConnection | null;
  closed: boolean;
}

/** DISCONNECT_REASON are the SSH_MSG_DISCONNECT reason codes we send (RFC 4253 §11.1). */
const DISCONNECT_REASON = { BY_APPLICATION: 11, TOO_MANY_CONNECTIONS: 12 } as const;

/** Admission is what serveConnection needs from the listener: the limits, and the end of the login grace. */
interface Admission {
  limits: ConnectionLimits;
  /** authenticated ends the connection's login grace */
  authenticated(): void;
}

/** sftpFrontEnd serves SFTP (and rclone's exec probes) over SSH. */
export function sftpFrontEnd(): FrontEnd {
  let listener: net.Server | null = null;
  let graceMs = 0;
  /** every SSH connection, with its state once serveConnection has it */
  const clients = new Map<Connection, ConnectionState | null>();
  /** sockets ssh2 has not made a connection of yet (no SSH identification line received) */
  const unidentified = new Set<net.Socket>();

  return {
    name: 'sftp',
    async start(core, opts) {
      const cfg = core.config.sftp;
      graceMs = core.config.shutdown.grace_seconds * 1000;
      const log = core.log.child({ interface: 'sftp' });
      const limits = connectionLimits(core);
      /** sockets still in their login grace, with their ssh2 connection once there is one */
      const pending = new Map<net.Socket, Pending>();
      const hostKeys = cfg.host_keys.length
        ? readHostKeys(cfg.host_keys)
        : loadHostKeys(path.join(core.config.data_dir, 'ssh'));
      const ssh = new Server(
        {
          hostKeys,
          algorithms: ALGORITHMS as never,
          ident: 'svc-gateway',
          ...(cfg.banner ? { banner: cfg.banner.endsWith('\n') ? cfg.banner : `${cfg.banner}\n` } : {}),
          keepaliveInterval: cfg.keepalive_interval_seconds * 1000,
          keepaliveCountMax: 3,
        },
        (client, info) => {
          const socket = socketOf(client);
          const entry = socket && pending.get(socket);
          if (socket) unidentified.delete(socket);
          if (entry) entry.client = client;
          clients.set(client, null);
          client.on('close', () => clients.delete(client));
          const state = serveConnection(
            core,
            log,
            client,
            socket ? clientAddress(socket) : plainAddress(info.ip),
            {
              limits,
              authenticated: () => {
                if (!entry) return;
                clearTimeout(entry.timer);
                if (socket) pending.delete(socket);
              },
            },
          );
          if (clients.has(client)) clients.set(client, state);
        },
      );
      // Login grace (OpenSSH's LoginGraceTime): from accept until authenticated. ssh2 has no timeout
      // before authentication, nor one before the client's identification line (a port scanner or
      // a half-dead peer that says nothing would hold its socket for good), so we accept the sockets
      // ourselves and end one not authenticated in time (or idle for the idle timeout, if shorter).
      const loginGraceMs = Math.min(cfg.login_grace_seconds, cfg.idle_timeout_seconds) * 1000;
      // noDelay: SFTP is request-reply with small packets; with Nagle's algorithm each reply
      // waited for the client's delayed ACK (about 40 ms a request: sshfs made 20 files a second).
      const s = net.createServer({ noDelay: true }, (socket) => {
        if (!limits.admitOrRefuse('sftp', socket, refuseConnection)) return;
        unidentified.add(socket);
        const entry: Pending = {
          client: null,
          timer: setTimeout(() => {
            pending.delete(socket);
            log.debug('sftp: login grace time exceeded', { ip: plainAddress(socket.remoteAddress) });
            if (entry.client)
              disconnect(entry.client, DISCONNECT_REASON.BY_APPLICATION, 'Login grace time exceeded');
            else socket.destroy();
          }, loginGraceMs),
        };
        pending.set(socket, entry);
        socket.once('close', () => {
          clearTimeout(entry.timer);
          pending.delete(socket);
          unidentified.delete(socket);
        });
        ssh.injectSocket(socket);
      });
      acceptProxyProtocol(s, core.config.proxy, log);
      listener = s;
      const port = await listen(s, opts.port, opts.host);
      s.on('error', (err: Error) => log.error('sftp listener error', { error: err.message }));
      return { port };
    },
    async stop() {
      const s = listener;
      if (!s) return;
      listener = null;
      const closed = new Promise<void>((resolve) => s.close(() => resolve()));
      for (const socket of unidentified) socket.destroy();
      // A connection with a file open may finish it within the grace; the others are told at once.
      // One whose transfer has just ended gets FINISHED_MS to close by itself: `sftp -b` ends its
      // connection right after the last reply, and a disconnect in between fails its run (exit 255).
      // Ending a connection closes its channels; their sessions abort unfinished uploads.
      const deadline = Date.now() + graceMs;
      const told = new Set<Connection>();
      /** when each connection that was transferring during the drain was last seen to be */
      const finishing = new Map<Connection, number>();
      const sweep = () => {
        const now = Date.now();
        const late = now >= deadline;
        for (const [c, state] of clients) {
          if (told.has(c)) continue;
          if (!late && state) {
            if ([...state.sessions].some((x) => x.transferring)) {
              finishing.set(c, now);
              continue;
            }
            const seen = finishing.get(c);
            if (seen !== undefined && now - seen < FINISHED_MS) continue;
          }
          told.add(c);
          disconnect(c, DISCONNECT_REASON.BY_APPLICATION, 'Server shutting down');
        }
      };
      sweep();
      const drain = setInterval(sweep, 100);
      await closed;
      clearInterval(drain);
    },
  };
}

/** Pending is a connection in its login grace: the timer that ends it, and its ssh2 connection. */
interface Pending {
  timer: NodeJS.Timeout;
  client: Connection | null;
}

/** FINISHED_MS is how long a draining connection whose transfer ended may take to close by itself. */
const FINISHED_MS = 1_000;

/** END_GRACE_MS is how long an ended connection may take to close before its socket is cut. */
const END_GRACE_MS = 2_000;

/**
 * endConnection ends an SSH connection (a disconnect message, then our FIN) and cuts its socket if
 * it is not closed within END_GRACE_MS: a client that vanished without a reset, or one that never
 * closes its side, would otherwise keep the socket open for good (idle timeout, shutdown).
 */
function endConnection(client: Connection): void {
  const socket = socketOf(client);
  const cut = setTimeout(() => socket?.destroy(), END_GRACE_MS);
  client.once('close', () => clearTimeout(cut));
  client.end();
}

/**
 * disconnect sends SSH_MSG_DISCONNECT with a reason code and a description the client shows
 * (OpenSSH: "Received disconnect from <host> port <port>:<code>: <description>"), then ends the
 * connection like endConnection. ssh2's own disconnect sends no description, so the packet is
 * built here and sent through ssh2's packet writer and cipher (internals, checked by the limits
 * tests); without them it falls back to ssh2's description-less end.
 */
function disconnect(client: Connection, reason: number, description: string): void {
  const proto = (client as unknown as { _protocol?: SshProtocolInternals })._protocol;
  const write = proto?._packetRW?.write;
  const socket = socketOf(client);
  if (!proto || !write || !proto._cipher || !socket || socket.destroyed) return endConnection(client);
  const text = Buffer.from(description, 'utf8');
  const start = write.allocStartKEX;
  const packet = write.alloc(1 + 4 + 4 + text.length + 4, true);
  packet[start] = 1; // SSH_MSG_DISCONNECT
  packet.writeUInt32BE(reason, start + 1);
  packet.writeUInt32BE(text.length, start + 5);
  text.copy(packet, start + 9);
  packet.writeUInt32BE(0, start + 9 + text.length); // language tag: none
  proto._cipher.encrypt(write.finalize(packet, true));
  const cut = setTimeout(() => socket.destroy(), END_GRACE_MS);
  socket.once('close', () => clearTimeout(cut));
  socket.end();
}

/** SshProtocolInternals are the parts of ssh2's Protocol object disconnect uses (ssh2 1.x). */
interface SshProtocolInternals {
  _packetRW?: {
    write?: {
      allocStartKEX: number;
      alloc(length: number, forceKEX: boolean): Buffer;
      finalize(packet: Buffer, forceKEX: boolean): Buffer;
    };
  };
  _cipher?: { encrypt(packet: Buffer): void };
}

/**
 * refuseConnection answers a connection over a limit in SSH's terms before any key exchange: our
 * identification line, then an unencrypted SSH_MSG_DISCONNECT "too many connections" with the
 * reason (RFC 4253 allows it before NEWKEYS; OpenSSH prints "Received disconnect from …").
 */
function refuseConnection(socket: net.Socket, refusal: Refusal): void {
  socket.write('SSH-2.0-svc-gateway\r\n');
  socket.end(disconnectPacket(DISCONNECT_REASON.TOO_MANY_CONNECTIONS, refusal.message));
  // Read what the client still sends (its identification, its KEXINIT), so our close does not
  // reset the reply away.
  socket.resume();
}

/** disconnectPacket is SSH_MSG_DISCONNECT as an unencrypted binary packet (RFC 4253 §6, §11.1). */
export function disconnectPacket(reason: number, description: string): Buffer {
  const text = Buffer.from(description, 'utf8');
  const payload = Buffer.alloc(1 + 4 + 4 + text.length + 4);
  payload[0] = 1;
  payload.writeUInt32BE(reason, 1);
  payload.writeUInt32BE(text.length, 5);
  text.copy(payload, 9);
  // length (4) + padding length (1) + payload + padding is a multiple of 8, with 4 bytes of padding at least
  let padding = 8 - ((5 + payload.length) % 8);
  if (padding < 4) padding += 8;
  const packet = Buffer.alloc(5 + payload.length + padding);
  packet.writeUInt32BE(1 + payload.length + padding, 0);
  packet[4] = padding;
  payload.copy(packet, 5);
  return packet;
}

/** socketOf is the socket of a server-side connection (ssh2 gives no public way to reach it). */
function socketOf(client: Connection): net.Socket | undefined {
  return (client as unknown as { _sock?: net.Socket })._sock;
}

function serveConnection(
  core: Core,
  log: Logger,
  client: Connection,
  rawIp: string,
  admission: Admission,
): ConnectionState {
  const cfg = core.config.sftp;
  const state: ConnectionState = {
    principal: null,
    sessions: new Set(),
    lastActive: Date.now(),
    lease: null,
    presence: null,
    closed: false,
  };
  client.on('close', () => {
    state.closed = true;
    state.lease?.release();
    state.presence?.close();
  });
  const touch = () => {
    state.lastActive = Date.now();
  };
  const idleMs = cfg.idle_timeout_seconds * 1000;
  const idle = setInterval(
    () => {
      const busy = [...state.sessions].some((s) => s.busy);
      if (busy) touch();
      else if (Date.now() - state.lastActive >= idleMs) {
        log.debug('sftp: idle timeout', { ip: rawIp });
        endConnection(client);
      }
    },
    Math.min(idleMs, 10_000),
  );
  idle.unref();
  client.on('close', () => clearInterval(idle));
  client.on('error', (err: Error) => log.debug('ssh connection error', { ip: rawIp, error: err.message }));

  client.on('authentication', (ctx: AuthContext) => {
    touch();
    authenticate(core, ctx, rawIp).then(
      (result) => {
        if (result === 'key-ok') ctx.accept();
        else if (result === 'unavailable') {
          // SSH's userauth has no "try later" reply, and a rejection reads as a wrong password
          // ("Permission denied"); the client is disconnected instead, so OpenSSH ends with
          // "Connection closed" and asks for no other password. The core logged the cause once.
          endConnection(client);
        } else if (result) {
          const lease = admission.limits.openSession(userKey(result));
          if (isRefusal(lease)) {
            admission.limits.refused('sftp', rawIp, lease, { user: result.user?.username });
            // OpenSSH prints "Received disconnect from …: Too many sessions for this user …".
            disconnect(client, DISCONNECT_REASON.TOO_MANY_CONNECTIONS, lease.message);
            return;
          }
          if (state.closed) lease.release();
          else {
            state.lease = lease;
            state.presence = openPresence(core, result, rawIp, () =>
              disconnect(
                client,
                DISCONNECT_REASON.BY_APPLICATION,
                'Your connection was ended by an administrator',
              ),
            );
          }
          state.principal = result;
          admission.authenticated();
          ctx.accept();
        } else ctx.reject([...AUTH_METHODS]);
      },
      (err: unknown) => {
        log.error('ssh authentication failed unexpectedly', { error: String(err) });
        ctx.reject([...AUTH_METHODS]);
      },
    );
  });

  client.on('ready', () => {
    client.on('session', (accept) => {
      const session = accept();
      const principal = state.principal!;
      session.on('subsystem', (acceptSub, reject, info) => {
        if (info.name !== 'sftp') return reject();
        const channel = acceptSub() as ServerChannel;
        const session = sessionId();
        const sessionLog = log.child({ session, ip: rawIp, user: userOf(principal) });
        const sftp = new SftpSession(channel, core.files.session(principal), {
          maxHandles: cfg.max_handles,
          maxInflight: cfg.max_inflight_requests,
          dataDir: core.config.data_dir,
          username: principal.user?.username ?? 'site',
          log: sessionLog,
          touch,
          batch: new RequestBatch(core, sessionLog, 'sftp', session),
          transfer: (t) => transferred(core, sessionLog, 'sftp', t),
          presence: state.presence,
        });
        state.sessions.add(sftp);
        channel.on('close', () => state.sessions.delete(sftp));
      });
      session.on('exec', (acceptExec, _reject, info) => {
        touch();
        const channel = acceptExec();
        runExec(info.command, core.files.session(principal))
          .catch((err: unknown) => {
            log.error('sftp exec failed', { error: String(err) });
            return { stdout: '', stderr: 'internal error\n', code: 1 };
          })
          .then((res) => finish(channel, res));
      });
      session.on('shell', (acceptShell) => {
        finish(acceptShell(), {
          stdout: '',
          stderr: 'This server offers SFTP only; shell access is not available.\r\n',
          code: 1,
        });
      });
    });
  });
  return state;
}

/** finish writes a command's output, then exit-status, then closes the channel. */
function finish(channel: ServerChannel, res: { stdout: string; stderr: string; code: number }): void {
  if (res.stdout) channel.write(res.stdout);
  if (res.stderr) channel.stderr.write(res.stderr);
  channel.exit(res.code);
  channel.end();
}

/**
 * authenticate takes one SSH authentication attempt to the core's gate and returns the admitted
 * principal, `key-ok` for an acceptable key offer, null to reject, or `unavailable` when the gate
 * could not answer (the database is down): that is no wrong password, and must not read as one.
 * A public-key offer without a signature is only a question ("would you take this key?") and
 * records nothing; the signed attempt is verified here (SSH's part), then admitted by the core
 * (whose key it is, and the rest of the gate).
 */
async function authenticate(
  core: Core,
  ctx: AuthContext,
  ip: string,
): Promise<Principal | 'key-ok' | 'unavailable' | null> {
  const refused = (err: unknown): 'unavailable' | null => {
    if (err instanceof GatewayError && err.family === 'service-unavailable') return 'unavailable';
    if (err instanceof GatewayError) return null;
    throw err;
  };
  const login = (password: string) =>
    core.gate.login({ interface: 'sftp', ip, username: ctx.username, password }).catch(refused);
  switch (ctx.method) {
    case 'password':
      return login(ctx.password);
    case 'keyboard-interactive': {
      // WinSCP and FileZilla log in this way: one prompt, the password.
      const answers = await new Promise<string[]>((resolve) =>
        ctx.prompt([{ prompt: 'Password: ', echo: false }], (a) => resolve(a)),
      );
      return answers[0] === undefined ? null : login(answers[0]);
    }
    case 'publickey': {
      const blob = ctx.key.data;
      if (!ctx.signature || !ctx.blob) {
        return core.gate.acceptsKey('sftp', ctx.username, blob).then((ok) => (ok ? 'key-ok' : null), refused);
      }
      const key = utils.parseKey(blob);
      if (key instanceof Error || !key.verify(ctx.blob, ctx.signature, ctx.hashAlgo)) return null;
      return core.gate
        .loginWithKey({ interface: 'sftp', ip, username: ctx.username, key: blob })
        .catch(refused);
    }
    default:
      return null;
  }
}
