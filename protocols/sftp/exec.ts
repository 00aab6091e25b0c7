/**
 * SSH exec requests. There is no shell: rclone's probes on every connection (`md5sum`, `sha1sum`,
 * `echo ...`, research/libraries.md §2 item 8) get a fast, deterministic answer: `md5sum <path>`
 * from the stored md5, the `echo ${ShellId}%ComSpec%` shell probe answered as a POSIX shell, exit
 * 127 for every other command. Legacy `scp -O` (`scp -t`/`scp -f`) is
 * refused with a message: OpenSSH 9+ scp uses SFTP by default, which is served in full.
 */
import { GatewayError, resolveChroot, type FileSession } from '../../src/core/index.ts';

/** ExecResult is what a command prints and its exit status. */
export interface ExecResult {
  stdout: string;
  stderr: string;
  code: number;
}

/** EMPTY_MD5 is md5sum's answer for empty standard input (rclone's availability probe). */
const EMPTY_MD5 = 'd41d8cd98f00b204e9800998ecf8427e';

/** splitWords splits a command line the way a POSIX shell would for plain words and quotes. */
export function splitWords(line: string): string[] {
  const out: string[] = [];
  let word = '';
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === "'") {
      const end = line.indexOf("'", i + 1);
      word += line.slice(i + 1, end < 0 ? line.length : end);
      i = end < 0 ? line.length : end;
      inWord = true;
    } else if (c === '"') {
      i++;
      while (i < line.length && line[i] !== '"') {
        if (line[i] === '\\' && i + 1 < line.length && '"\\$`'.includes(line[i + 1]!)) i++;
        word += line[i++];
      }
      inWord = true;
    } else if (c === '\\' && i + 1 < line.length) {
      word += line[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) out.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (inWord) out.push(word);
  return out;
}

/** runExec answers one exec request on behalf of the session's principal. */
export async function runExec(command: string, files: FileSession): Promise<ExecResult> {
  const [name = '', ...args] = splitWords(command);
  if (name === 'scp')
    return {
      stdout: '',
      stderr:
        'svc-gateway: the legacy scp protocol (scp -O) is not supported; use scp without -O (SFTP mode)\n',
      code: 1,
    };
  // rclone's shell-type probe: a POSIX shell expands ${ShellId} to nothing and prints %ComSpec%.
  // Answering as one makes rclone use `md5sum` (and so `rclone check` compares md5s).
  if (command.trim() === 'echo ${ShellId}%ComSpec%') return { stdout: '%ComSpec%\n', stderr: '', code: 0 };
  if (name !== 'md5sum') return { stdout: '', stderr: `${name}: command not found\n`, code: 127 };
  if (args.length === 0) return { stdout: `${EMPTY_MD5}  -\n`, stderr: '', code: 0 };
  let stdout = '';
  let stderr = '';
  let code = 0;
  for (const arg of args) {
    try {
      const e = await files.stat(resolveChroot('', arg));
      if (e.type === 'directory' || !e.md5) throw new GatewayError('bad-request/cannot-download-directory');
      stdout += `${e.md5}  ${arg}\n`;
    } catch (err) {
      if (!(err instanceof GatewayError)) throw err;
      const why =
        err.family === 'not-found'
          ? 'No such file or directory'
          : err.type === 'bad-request/cannot-download-directory'
            ? 'Is a directory'
            : err.message;
      stderr += `md5sum: ${arg}: ${why}\n`;
      code = 1;
    }
  }
  return { stdout, stderr, code };
}
