/**
 * FtpReplies reads an FTP control connection's replies line by line: the raw control client of the
 * FTP tests (RawControl) and the soak's FTP client (test/soak/ftp.ts) both read through it. A
 * connection upgraded to TLS (AUTH TLS) is attached again with its TLS socket.
 */
import type net from 'node:net';

/** FtpReplies is the reply reader of one control connection. */
export class FtpReplies {
  /** lines received and not yet read as a reply */
  readonly lines: string[] = [];
  closed = false;
  private buffer = '';
  private waiters: (() => void)[] = [];

  /** attach reads `socket` from now on (after `detach` of the socket it replaces). */
  attach(socket: net.Socket): void {
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      this.buffer += d;
      let nl: number;
      while ((nl = this.buffer.indexOf('\n')) >= 0) {
        this.lines.push(this.buffer.slice(0, nl).replace(/\r$/, ''));
        this.buffer = this.buffer.slice(nl + 1);
      }
      this.wake();
    });
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    socket.on('error', () => undefined);
  }

  /** detach stops reading `socket` (before it is wrapped in TLS). */
  detach(socket: net.Socket): void {
    for (const event of ['data', 'close', 'error']) socket.removeAllListeners(event);
  }

  private wake() {
    for (const w of this.waiters.splice(0)) w();
  }

  /** reply reads the next complete reply (a multi-line one joined with \n); what came before a close. */
  async reply(timeoutMs = 10_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    const out: string[] = [];
    for (;;) {
      while (this.lines.length) {
        const line = this.lines.shift()!;
        out.push(line);
        const first = out[0]!;
        if (/^\d{3} /.test(line) && (out.length === 1 || line.startsWith(first.slice(0, 3))))
          return out.join('\n');
        if (!/^\d{3}-/.test(first)) return out.join('\n');
      }
      if (this.closed) return out.join('\n');
      if (Date.now() > deadline) throw new Error(`no reply in ${timeoutMs} ms (got: ${out.join('|')})`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 100);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }
}
