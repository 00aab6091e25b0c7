/**
 * A small FTP client for the soak, in-process on node:net and node:tls so that thousands of
 * operations cost no process each: plain FTP, explicit TLS (AUTH TLS, PROT P) and implicit TLS,
 * passive data connections by EPSV that resume the control connection's TLS session (the gateway
 * requires it by default, as FileZilla expects), LIST/MLSD, STOR, RETR, RNFR/RNTO, DELE, NOOP, QUIT.
 */
import { createHash } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { FtpReplies } from '../helpers/ftp-replies.ts';

/** FtpMode is the connection's security: none, explicit TLS on the FTP port, implicit on the FTPS port. */
export type FtpMode = 'plain' | 'explicit' | 'implicit';

/** Reply is one complete FTP reply. */
interface Reply {
  code: number;
  text: string;
}

const TIMEOUT_MS = 60_000;

/** FtpClient is one logged-in control connection. */
export class FtpClient {
  private socket: net.Socket;
  private readonly replies = new FtpReplies();
  private session: Buffer | undefined;
  private readonly secure: boolean;

  private constructor(socket: net.Socket, secure: boolean) {
    this.socket = socket;
    this.secure = secure;
    this.attach(socket);
  }

  private attach(socket: net.Socket): void {
    this.replies.attach(socket);
    if (socket instanceof tls.TLSSocket) socket.on('session', (s: Buffer) => (this.session = s));
  }

  /** connect opens a control connection in `mode` and logs in. */
  static async connect(
    host: string,
    port: number,
    mode: FtpMode,
    username: string,
    password: string,
  ): Promise<FtpClient> {
    const socket =
      mode === 'implicit'
        ? tls.connect({ host, port, rejectUnauthorized: false })
        : net.connect({ host, port });
    await new Promise<void>((resolve, reject) => {
      socket.once(mode === 'implicit' ? 'secureConnect' : 'connect', resolve);
      socket.once('error', reject);
    });
    const c = new FtpClient(socket, mode !== 'plain');
    try {
      await c.expect(await c.reply(), 220);
      if (mode === 'explicit') {
        await c.command('AUTH TLS', 234);
        c.replies.detach(c.socket);
        const secured = tls.connect({ socket: c.socket, rejectUnauthorized: false });
        await new Promise<void>((resolve, reject) => {
          secured.once('secureConnect', resolve);
          secured.once('error', reject);
        });
        c.socket = secured;
        c.attach(secured);
      }
      if (mode !== 'plain') {
        await c.command('PBSZ 0', 200);
        await c.command('PROT P', 200);
      }
      await c.command(`USER ${username}`, 331);
      await c.command(`PASS ${password}`, 230);
      await c.command('TYPE I', 200);
      return c;
    } catch (err) {
      c.destroy();
      throw err;
    }
  }

  /** reply reads the next complete reply. */
  private async reply(): Promise<Reply> {
    const text = await this.replies.reply(TIMEOUT_MS);
    if (!/^\d{3}/.test(text)) throw new Error(`FTP: the control connection closed (${text || 'no reply'})`);
    return { code: Number(text.slice(0, 3)), text };
  }

  private async expect(r: Reply, ...codes: number[]): Promise<Reply> {
    if (!codes.includes(r.code)) throw new Error(`FTP: expected ${codes.join('/')}, got ${r.text}`);
    return r;
  }

  /** command sends one command and expects one of `codes` in its reply. */
  async command(line: string, ...codes: number[]): Promise<Reply> {
    this.socket.write(`${line}\r\n`);
    return this.expect(await this.reply(), ...codes);
  }

  /** data opens a passive data connection (EPSV), with TLS resuming the control session when secure. */
  private async data(): Promise<net.Socket> {
    const r = await this.command('EPSV', 229);
    const m = /\(\|\|\|(\d+)\|\)/.exec(r.text);
    if (!m) throw new Error(`FTP: bad EPSV reply ${r.text}`);
    const port = Number(m[1]);
    const host = this.socket.remoteAddress ?? '127.0.0.1';
    const tcp = net.connect({ host, port });
    tcp.on('error', () => undefined);
    await new Promise<void>((resolve, reject) => {
      tcp.once('connect', resolve);
      tcp.once('error', reject);
    });
    // The server starts TLS on the data connection once it has the command that uses it: the
    // handshake runs while the command is sent, so do not wait for it here.
    const socket = this.secure
      ? tls.connect({ socket: tcp, rejectUnauthorized: false, session: this.session })
      : tcp;
    socket.on('error', () => undefined);
    return socket;
  }

  /** receive runs a command whose answer comes on a data connection and returns what arrived there. */
  private async receive(line: string, sink: (chunk: Buffer) => void): Promise<void> {
    const socket = await this.data();
    const ended = new Promise<void>((resolve, reject) => {
      socket.on('data', sink);
      socket.once('end', resolve);
      socket.once('error', reject);
    });
    ended.catch(() => undefined); // awaited only after the command's reply
    try {
      await this.command(line, 150, 125);
      await ended;
      await this.expect(await this.reply(), 226, 250);
    } finally {
      socket.destroy();
    }
  }

  /** list returns the names in folder `dir` (MLSD). */
  async list(dir: string): Promise<string[]> {
    const chunks: Buffer[] = [];
    await this.receive(`MLSD ${dir}`, (c) => chunks.push(c));
    return Buffer.concat(chunks)
      .toString('utf8')
      .split(/\r?\n/)
      .filter((l) => l && !/type=c?dir;/i.test(l))
      .map((l) => l.slice(l.indexOf(' ') + 1));
  }

  /** download reads a file and returns its size and md5. */
  async download(file: string): Promise<{ size: number; md5: string }> {
    const md5 = createHash('md5');
    let size = 0;
    await this.receive(`RETR ${file}`, (c) => {
      md5.update(c);
      size += c.length;
    });
    return { size, md5: md5.digest('hex') };
  }

  /** upload stores a file from `chunks`; it is complete when the data connection closed normally. */
  async upload(file: string, chunks: Iterable<Buffer>): Promise<void> {
    const socket = await this.data();
    const closed = new Promise<void>((resolve, reject) => {
      socket.once('close', () => resolve());
      socket.once('error', reject);
    });
    closed.catch(() => undefined); // awaited only after STOR's reply
    try {
      await this.command(`STOR ${file}`, 150, 125);
      for (const chunk of chunks) {
        if (!socket.write(chunk))
          await new Promise<void>((resolve, reject) => {
            const lost = () => reject(new Error('FTP: data connection closed during STOR'));
            socket.once('close', lost);
            socket.once('drain', () => {
              socket.off('close', lost);
              resolve();
            });
          });
      }
      socket.end();
      await closed;
      await this.expect(await this.reply(), 226, 250);
    } finally {
      socket.destroy();
    }
  }

  /** rename moves `from` to `to`. */
  async rename(from: string, to: string): Promise<void> {
    await this.command(`RNFR ${from}`, 350);
    await this.command(`RNTO ${to}`, 250);
  }

  /** remove deletes a file. */
  async remove(file: string): Promise<void> {
    await this.command(`DELE ${file}`, 250);
  }

  /** noop keeps an idle connection alive. */
  async noop(): Promise<void> {
    await this.command('NOOP', 200);
  }

  /** quit says goodbye and closes. */
  async quit(): Promise<void> {
    try {
      await this.command('QUIT', 221);
    } finally {
      this.destroy();
    }
  }

  /** destroy closes the connection at once. */
  destroy(): void {
    this.socket.destroy();
  }
}
