/**
 * An OpenSSH sftp session kept open on a pipe (password through sshpass), for tests that need a
 * client connected while they look at it from elsewhere (the Connections list), optionally with a
 * bandwidth limit so an upload lasts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import { SSH_OPTIONS } from '../protocols/sftp/clients.ts';

/** OpenSftp is an OpenSSH sftp process reading commands from a pipe kept open. */
export interface OpenSftp {
  child: ChildProcess;
  stderr: () => string;
  /** run sends one sftp command (put, get, ls …) */
  run(command: string): void;
}

/** openSftp logs `username` in on 127.0.0.1:`port`; `limitKbit` is sftp's -l (Kbit/s). */
export function openSftp(port: number, username: string, password: string, limitKbit?: number): OpenSftp {
  const child = spawn(
    'sshpass',
    [
      ...['-p', password, 'sftp'],
      ...(limitKbit ? ['-l', String(limitKbit)] : []),
      ...['-P', String(port), ...SSH_OPTIONS],
      ...['-o', 'BatchMode=no', '-o', 'PubkeyAuthentication=no', '-o', 'NumberOfPasswordPrompts=1'],
      `${username}@127.0.0.1`,
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  child.stdout!.resume();
  child.stdin!.on('error', () => undefined);
  return { child, stderr: () => stderr, run: (command) => child.stdin!.write(`${command}\n`) };
}

/**
 * sftpClosed waits (bounded) until the client says its connection closed: sftp prints
 * "Connection closed" (sshpass, holding its terminal, may outlive it while the pipe stays open).
 */
export async function sftpClosed(sftp: OpenSftp): Promise<void> {
  for (let i = 0; i < 150 && sftp.child.exitCode === null && !/closed/i.test(sftp.stderr()); i++)
    await new Promise((r) => setTimeout(r, 200));
  expect(sftp.stderr()).to.match(/closed/i);
}
