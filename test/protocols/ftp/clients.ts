/**
 * Helpers of the FTP tests: a gateway with both FTP listeners on free ports, users made through
 * the core, and the real clients (lftp, curl) run as child processes with timeouts, plus a raw
 * control-connection client for what no client sends (split commands, garbage, other loopback
 * addresses).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import net from 'node:net';
import { Readable } from 'node:stream';
import { operatorPrincipal, type Core } from '../../../src/core/index.ts';
import { FtpReplies } from '../../helpers/ftp-replies.ts';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.ts';

/** PASSWORD is every test user's password. */
export const PASSWORD = 'secret-password-1';

/** startFtpGateway starts a gateway with FTP (explicit TLS) and implicit FTPS on free ports. */
export function startFtpGateway(overrides: Record<string, unknown> = {}): Promise<TestGateway> {
  const ports = (overrides.ports as Record<string, unknown> | undefined) ?? {};
  return startTestGateway({ ...overrides, ports: { ftp: 0, ftps: 0, ...ports } });
}

/** createFtpUser makes a user whose user_root exists, with a permission on it, through the core. */
export async function createFtpUser(
  core: Core,
  username: string,
  opts: { root?: string; permission?: string | null; fields?: Record<string, unknown> } = {},
): Promise<void> {
  const root = opts.root ?? `home/${username}`;
  await core.namespace.mkdir(operatorPrincipal(), root).catch(() => undefined);
  await core.users.create(operatorPrincipal(), {
    username,
    password: PASSWORD,
    user_root: `${root}/`,
    ...(opts.fields ?? {}),
  });
  if (opts.permission !== null)
    await core.permissions.create(operatorPrincipal(), {
      path: root,
      username,
      permission: opts.permission ?? 'full',
    });
}

/** RunResult is what a client process did. */
export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** run runs a program with a timeout and never rejects (the exit code tells). */
export function run(command: string, args: string[], timeoutMs = 30_000): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** LftpMode selects the connection: plain, explicit TLS (AUTH TLS, PROT P) or implicit TLS. */
export type LftpMode = 'plain' | 'explicit' | 'implicit';

/** lftp runs an lftp script against the gateway as `username`. */
export function lftp(
  gw: TestGateway,
  mode: LftpMode,
  username: string,
  script: string,
  opts: { password?: string; extra?: string; timeoutMs?: number } = {},
): Promise<RunResult> {
  const port = mode === 'implicit' ? gw.ports.ftps! : gw.ports.ftp!;
  const settings = [
    'set cmd:fail-exit yes',
    'set net:max-retries 1',
    'set net:timeout 10',
    'set net:reconnect-interval-base 1',
    'set ssl:verify-certificate no',
    'set ftp:passive-mode yes',
    mode === 'plain' ? 'set ftp:ssl-allow no' : 'set ftp:ssl-force yes; set ftp:ssl-protect-data yes',
    opts.extra ?? '',
  ].join('; ');
  const url = `${mode === 'implicit' ? 'ftps' : 'ftp'}://127.0.0.1:${port}`;
  const pass = opts.password ?? PASSWORD;
  return run(
    'lftp',
    ['-c', `${settings}; open -u '${username}','${pass}' ${url}; ${script}`],
    opts.timeoutMs ?? 30_000,
  );
}

/** curlFtp runs curl against a path on the gateway's FTP listener ('implicit' uses ftps://). */
export function curlFtp(
  gw: TestGateway,
  mode: LftpMode,
  username: string,
  path: string,
  args: string[] = [],
  timeoutMs = 30_000,
): Promise<RunResult> {
  const url =
    mode === 'implicit'
      ? `ftps://127.0.0.1:${gw.ports.ftps}/${path}`
      : `ftp://127.0.0.1:${gw.ports.ftp}/${path}`;
  const tls = mode === 'plain' ? [] : ['--insecure', ...(mode === 'explicit' ? ['--ssl-reqd'] : [])];
  return run(
    'curl',
    ['-sS', '--max-time', String(timeoutMs / 1000), '-u', `${username}:${PASSWORD}`, ...tls, ...args, url],
    timeoutMs + 5000,
  );
}

/** md5 is the hex md5 of some bytes. */
export function md5(data: Buffer | string): string {
  return createHash('md5').update(data).digest('hex');
}

/**
 * RawControl is a bare control connection: write bytes as they are, read replies line by line.
 * For what no real client sends: split commands, garbage, overlong lines, other source addresses.
 */
export class RawControl {
  private readonly replies = new FtpReplies();

  private constructor(readonly socket: net.Socket) {
    this.replies.attach(socket);
  }

  /** lines are the lines received and not yet read as a reply. */
  get lines(): string[] {
    return this.replies.lines;
  }

  /** closed tells whether the server closed the connection. */
  get closed(): boolean {
    return this.replies.closed;
  }

  /** connect opens a control connection and reads the 220 greeting. */
  static async connect(port: number, localAddress?: string): Promise<RawControl> {
    const socket = net.connect({ port, host: '127.0.0.1', ...(localAddress ? { localAddress } : {}) });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const c = new RawControl(socket);
    const greeting = await c.reply();
    if (!greeting.startsWith('220')) throw new Error(`unexpected greeting ${greeting}`);
    return c;
  }

  /** reply reads the next complete reply (a multi-line one joined with \n). */
  reply(timeoutMs = 10_000): Promise<string> {
    return this.replies.reply(timeoutMs);
  }

  /** send writes one command (CRLF added) and reads its reply. */
  async send(line: string): Promise<string> {
    this.socket.write(`${line}\r\n`);
    return this.reply();
  }

  /** login sends USER and PASS and returns PASS's reply. */
  async login(username: string, password = PASSWORD): Promise<string> {
    await this.send(`USER ${username}`);
    return this.send(`PASS ${password}`);
  }

  /** pasvPort sends PASV and returns the port it names. */
  async pasvPort(): Promise<number> {
    const r = await this.send('PASV');
    const m = /\((\d+),(\d+),(\d+),(\d+),(\d+),(\d+)\)/.exec(r);
    if (!m) throw new Error(`bad PASV reply ${r}`);
    return Number(m[5]) * 256 + Number(m[6]);
  }

  /** close ends the connection. */
  close(): void {
    this.socket.destroy();
  }
}

/** readSiteFile reads a file's bytes through the core, by site path. */
export async function readSiteFile(core: Core, sitePath: string): Promise<Buffer> {
  const { stream } = await core.files.session(operatorPrincipal()).openRead(sitePath, { record: false });
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** writeSiteFile writes a file through the core, by site path. */
export async function writeSiteFile(core: Core, sitePath: string, data: Buffer | string): Promise<void> {
  await core.files.session(operatorPrincipal()).write(sitePath, Readable.from([Buffer.from(data)]));
}
