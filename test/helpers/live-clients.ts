/**
 * Real command-line clients kept running and logged in, driven line by line on their standard
 * input: lftp for FTP and OpenSSH sftp (batch mode, password through sshpass) for SFTP. A race test
 * starts and logs in both clients first, then writes one command to each in the same tick, so the
 * two requests reach the gateway as close together as two separate client processes can send them
 * (no process start or login in between). Each command is followed by a marker the client prints
 * when it is done; stdout and stderr share one pipe (`2>&1`), so an error line always comes before
 * the marker of its command.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { SSH_OPTIONS, authArgs } from '../protocols/sftp/clients.ts';

/** Outcome is what one command did: whether the client reported success, and what it printed. */
export interface Outcome {
  ok: boolean;
  output: string;
}

const TIMEOUT_MS = 30_000;

/**
 * LineClient runs a program with stdout and stderr merged, and reads its output up to markers.
 */
class LineClient {
  private output = '';
  private waiters: (() => void)[] = [];
  private exited = false;
  private serial = 0;

  protected constructor(
    protected readonly child: ChildProcess,
    readonly name: string,
  ) {
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (d: string) => {
      this.output += d;
      this.wake();
    });
    child.on('exit', () => {
      this.exited = true;
      this.wake();
    });
    // A client that died makes the write fail with EPIPE; the pending wait reports it.
    child.stdin!.on('error', () => undefined);
  }

  /** spawnMerged starts argv under sh with stderr joined to stdout. */
  protected static spawnMerged(argv: string[]): ChildProcess {
    return spawn('sh', ['-c', 'exec "$@" 2>&1', 'sh', ...argv], { stdio: ['pipe', 'pipe', 'ignore'] });
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  protected nextMarker(): string {
    this.serial += 1;
    return `@@done-${this.serial}`;
  }

  /** send writes `lines` to the client and resolves with what it printed up to `marker`'s line. */
  protected async send(lines: string, marker: string): Promise<string> {
    this.child.stdin!.write(lines);
    const deadline = Date.now() + TIMEOUT_MS;
    // The marker as printed, at the start of a line (sftp also echoes the command that prints it).
    const printed = new RegExp(`(?:^|\\n)${marker}(?:[ \\r][^\\n]*)?\\n`);
    for (;;) {
      const m = printed.exec(this.output);
      if (m) {
        const end = m.index + m[0].length;
        const text = this.output.slice(0, end);
        this.output = this.output.slice(end);
        return text;
      }
      if (this.exited) throw new Error(`${this.name} exited; it printed: ${this.output}`);
      if (Date.now() > deadline)
        throw new Error(`${this.name}: no ${marker} within ${TIMEOUT_MS} ms; it printed: ${this.output}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 200);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** close ends standard input and waits for the client to exit (killing it after 5 s). */
  async close(): Promise<void> {
    if (this.exited) return;
    const gone = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.stdin!.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(timer);
  }
}

/**
 * LftpClient is lftp on plain FTP, logged in. lftp reads commands from a pipe as they come; each
 * command runs as `cmd && echo <marker> ok || echo <marker> failed`.
 */
export class LftpClient extends LineClient {
  /** open starts lftp, logs in to 127.0.0.1:`port` and waits until the login is done (a CWD of /). */
  static async open(port: number, username: string, password: string): Promise<LftpClient> {
    const c = new LftpClient(LineClient.spawnMerged(['lftp']), `lftp :${port}`);
    const settings = [
      'set cmd:interactive false',
      'set net:max-retries 1',
      'set net:timeout 15',
      'set net:reconnect-interval-base 1',
      'set ftp:ssl-allow no',
      'set ftp:passive-mode yes',
      // Nothing cached between rounds: every command asks the server.
      'set cache:enable no',
      // put sends the bytes with STOR and nothing else (no ALLO, no MFMT afterwards).
      'set ftp:use-allo no',
      'set ftp:use-mdtm-overloaded no',
      'set ftp:use-site-utime no',
      'set ftp:use-site-utime2 no',
    ];
    c.child.stdin!.write(`${settings.join('; ')}\n`);
    const login = await c.run(`open -u '${username}','${password}' ftp://127.0.0.1:${port}; cd /`);
    if (!login.ok) {
      await c.close();
      throw new Error(`lftp could not log in: ${login.output}`);
    }
    return c;
  }

  /** run sends one lftp command and resolves when lftp is done with it. */
  async run(command: string): Promise<Outcome> {
    const marker = this.nextMarker();
    const text = await this.send(`${command} && echo ${marker} ok || echo ${marker} failed\n`, marker);
    const line = text.slice(text.lastIndexOf(marker));
    return { ok: line.startsWith(`${marker} ok`), output: text.slice(0, text.lastIndexOf(marker)).trim() };
  }
}

/**
 * SftpClient is OpenSSH sftp in batch mode reading its batch from a pipe, logged in with a
 * password (sshpass). Commands are sent with a leading `-` so a failure does not end the batch;
 * sftp prints `sftp> <command>` before each one and an error line (`Couldn't …`) when it fails.
 */
export class SftpClient extends LineClient {
  /** open starts sftp, logs in on 127.0.0.1:`port` and waits until the session answers. */
  static async open(port: number, username: string, password: string): Promise<SftpClient> {
    const { prefix, args } = authArgs({ password });
    const argv = [
      ...prefix,
      'sftp',
      ...args,
      ...SSH_OPTIONS,
      '-b',
      '-',
      '-P',
      String(port),
      `${username}@127.0.0.1`,
    ];
    const c = new SftpClient(LineClient.spawnMerged(argv), `sftp :${port}`);
    const login = await c.run('pwd');
    if (!/Remote working directory/.test(login.output)) {
      await c.close();
      throw new Error(`sftp could not log in: ${login.output}`);
    }
    return c;
  }

  /** run sends one sftp command and resolves when sftp is done with it. */
  async run(command: string): Promise<Outcome> {
    const marker = this.nextMarker();
    const text = await this.send(`-${command}\n!echo ${marker}\n`, marker);
    const lines = text
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('sftp> ') && !l.startsWith(marker));
    const output = lines.join('\n');
    // OpenSSH words a failed request `remote <op> "…": <status>` (9.x) or `Couldn't <op> …` (older).
    const failed = lines.some((l) => /^(remote |Couldn't )|No such file|Permission denied|Failure/i.test(l));
    return { ok: !failed, output };
  }
}
