/** Navigation commands: PWD, CWD and CDUP, resolved like a chroot (`..` at the root stays there). */
import type { Command, FtpConnection } from '../connection.ts';
import { ReplyError } from '../errors.ts';

/** quotePath quotes a path for a 257 reply, doubling quotes inside it (RFC 959). */
export function quotePath(path: string): string {
  return `"/${path.replace(/"/g, '""')}"`;
}

async function changeDirectory(c: FtpConnection, arg: string): Promise<void> {
  const path = c.resolve(arg);
  const entry = await c.files.stat(path);
  if (entry.type !== 'directory') throw new ReplyError(550, `/${path} is not a folder`);
  c.cwd = path;
  c.reply(250, `Directory changed to /${path}`);
}

const pwd: Command = { run: (c) => c.reply(257, `${quotePath(c.cwd)} is the current directory`) };
const cwd: Command = { needsArg: true, run: (c, arg) => changeDirectory(c, arg) };
const cdup: Command = { run: (c) => changeDirectory(c, '..') };

/** navigationCommands are PWD, CWD and CDUP with their X… aliases (RFC 775). */
export const navigationCommands: Record<string, Command> = {
  PWD: pwd,
  XPWD: pwd,
  CWD: cwd,
  XCWD: cwd,
  CDUP: cdup,
  XCUP: cdup,
};
