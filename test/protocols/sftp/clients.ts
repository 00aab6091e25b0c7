/**
 * Real clients for the SFTP tests: OpenSSH sftp in batch mode and scp (password through sshpass,
 * or a key file), plus a raw SFTP v3 client on ssh2's Client for the hostile cases no polite
 * client sends.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import ssh2 from 'ssh2';
import type { ClientChannel } from 'ssh2';
import { operatorPrincipal } from '../../../src/core/index.ts';
import type { TestGateway } from '../../helpers/gateway.ts';
import { unique } from '../rest/client.ts';

/**
 * makeSftpUser creates a user whose `user_root` is a fresh folder home/<name> (created first, as
 * SPEC asks) with full rights unless `fields` say otherwise.
 */
export async function makeSftpUser(
  gw: TestGateway,
  password: string,
  fields: Record<string, unknown> = {},
): Promise<{ username: string; root: string }> {
  const username = unique('sftpu');
  const root = `home/${username}`;
  await gw.core.namespace.mkdir(operatorPrincipal(), root);
  await gw.core.users.create(operatorPrincipal(), {
    username,
    password,
    user_root: `${root}/`,
    grant_permission: 'full',
    ...fields,
  });
  return { username, root };
}

/** Login is how a client authenticates: a password, or a private key file. */
export type Login = { password: string } | { identity: string };

/** RunResult is what a client process printed and how it exited. */
export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** SSH_OPTIONS are what every OpenSSH client here is given: no host key checks, errors only. */
export const SSH_OPTIONS = [
  '-o',
  'StrictHostKeyChecking=no',
  '-o',
  'UserKnownHostsFile=/dev/null',
  '-o',
  'LogLevel=ERROR',
];

/** authArgs are the program prefix (sshpass) and options that log an OpenSSH client in with `login`. */
export function authArgs(login: Login): { prefix: string[]; args: string[] } {
  if ('password' in login)
    return {
      prefix: ['sshpass', '-p', login.password],
      // sftp -b sets BatchMode, which forbids password prompts; the first value given wins.
      args: ['-o', 'BatchMode=no', '-o', 'PubkeyAuthentication=no', '-o', 'NumberOfPasswordPrompts=1'],
    };
  return {
    prefix: [],
    args: ['-i', login.identity, '-o', 'IdentitiesOnly=yes', '-o', 'PasswordAuthentication=no'],
  };
}

/** run starts a program, feeds `input` to its standard input and collects its output. */
export function run(
  argv: string[],
  input = '',
  opts: { cwd?: string; timeoutMs?: number } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { cwd: opts.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    // A program that exits without reading its input (rclone rc) makes the write fail with EPIPE.
    child.stdin.on('error', () => undefined);
    child.stdin.end(input);
  });
}

/** sftpBatch runs OpenSSH sftp with `commands` as its batch file (one per line); `options` are more `-o` settings. */
export function sftpBatch(
  port: number,
  user: string,
  login: Login,
  commands: string[],
  opts: { cwd?: string; bind?: string; timeoutMs?: number; options?: string[] } = {},
): Promise<RunResult> {
  const { prefix, args } = authArgs(login);
  return run(
    [
      ...prefix,
      'sftp',
      ...args,
      ...SSH_OPTIONS,
      ...(opts.options ?? []).flatMap((o) => ['-o', o]),
      ...(opts.bind ? ['-o', `BindAddress=${opts.bind}`] : []),
      '-b',
      '-',
      '-P',
      String(port),
      `${user}@127.0.0.1`,
    ],
    `${commands.join('\n')}\n`,
    opts,
  );
}

/** scp runs OpenSSH scp (SFTP mode, the default since OpenSSH 9) with `args` after the options. */
export function scp(
  port: number,
  login: Login,
  args: string[],
  opts: { cwd?: string } = {},
): Promise<RunResult> {
  const { prefix, args: auth } = authArgs(login);
  return run([...prefix, 'scp', ...auth, ...SSH_OPTIONS, '-P', String(port), ...args], '', opts);
}

/** md5File is a local file's md5, hex. */
export function md5File(file: string): string {
  return createHash('md5').update(readFileSync(file)).digest('hex');
}

/** RawSftp is a bare SFTP v3 channel: send packets, read replies, nothing checked. */
export interface RawSftp {
  client: ssh2.Client;
  channel: ClientChannel;
  /** send writes one request packet (type, then the body after the length) */
  send(type: number, body: Buffer): void;
  /** next resolves with the next reply packet's payload (type byte first) */
  next(timeoutMs?: number): Promise<Buffer>;
  close(): void;
}

/** rawSftp logs in with a password over ssh2's Client and opens the sftp subsystem on a raw channel. */
export function rawSftp(port: number, username: string, password: string): Promise<RawSftp> {
  return new Promise((resolve, reject) => {
    const client = new ssh2.Client();
    client.on('error', reject);
    client.on('ready', () => {
      client.subsys('sftp', (err, channel) => {
        if (err) return reject(err);
        let buf = Buffer.alloc(0);
        const packets: Buffer[] = [];
        const waiters: ((b: Buffer) => void)[] = [];
        channel.on('data', (c: Buffer) => {
          buf = Buffer.concat([buf, c]);
          while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
            const len = buf.readUInt32BE(0);
            const p = buf.subarray(4, 4 + len);
            buf = buf.subarray(4 + len);
            const w = waiters.shift();
            if (w) w(p);
            else packets.push(p);
          }
        });
        resolve({
          client,
          channel,
          send(type, body) {
            const head = Buffer.alloc(5);
            head.writeUInt32BE(body.length + 1);
            head[4] = type;
            channel.write(Buffer.concat([head, body]));
          },
          next(timeoutMs = 10_000) {
            const ready = packets.shift();
            if (ready) return Promise.resolve(ready);
            return new Promise((res, rej) => {
              const t = setTimeout(() => rej(new Error('no SFTP reply')), timeoutMs);
              waiters.push((b) => {
                clearTimeout(t);
                res(b);
              });
            });
          },
          close() {
            client.end();
          },
        });
      });
    });
    client.connect({ host: '127.0.0.1', port, username, password });
  });
}

/** str encodes an SFTP string field. */
export function str(s: string | Buffer): Buffer {
  const b = typeof s === 'string' ? Buffer.from(s) : s;
  const head = Buffer.alloc(4);
  head.writeUInt32BE(b.length);
  return Buffer.concat([head, b]);
}

/** u32 encodes an SFTP uint32 field. */
export function u32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v >>> 0);
  return b;
}

/** u64 encodes an SFTP uint64 field. */
export function u64(v: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(v));
  return b;
}

/** exec runs one command over ssh2's Client and returns its output and exit status. */
export function exec(port: number, username: string, password: string, command: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const client = new ssh2.Client();
    client.on('error', reject);
    client.on('ready', () => {
      client.exec(command, (err, ch) => {
        if (err) return reject(err);
        let stdout = '';
        let stderr = '';
        let code: number | null = null;
        ch.on('data', (c: Buffer) => (stdout += c.toString()));
        ch.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        ch.on('exit', (c: number) => (code = c));
        ch.on('close', () => {
          client.end();
          resolve({ code, stdout, stderr });
        });
      });
    });
    client.connect({ host: '127.0.0.1', port, username, password });
  });
}
