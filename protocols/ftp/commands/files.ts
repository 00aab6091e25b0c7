/**
 * File commands: DELE, MKD, RMD, RNFR/RNTO, SIZE, MDTM and MFMT. Each is one core call on the
 * session (a stat first where FTP distinguishes files from folders, so RMD never deletes a file).
 */
import type { Command, FtpConnection } from '../connection.ts';
import { ReplyError } from '../errors.ts';
import { ftpTime } from './listing.ts';
import { quotePath } from './navigation.ts';

async function requireType(c: FtpConnection, path: string, type: 'file' | 'directory') {
  const entry = await c.files.stat(path);
  if (entry.type !== type)
    throw new ReplyError(
      550,
      `/${path} is ${type === 'file' ? 'a folder, not a file' : 'a file, not a folder'}`,
    );
  return entry;
}

/** parseFtpTime reads RFC 3659's YYYYMMDDHHMMSS[.sss] (UTC). */
export function parseFtpTime(s: string): Date | null {
  const m = /^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\.\d{1,3})?$/.exec(s);
  if (!m) return null;
  const [, y, mo, d, h, mi, sec, frac] = m;
  const ms = frac ? Math.round(Number(frac) * 1000) : 0;
  const date = new Date(Date.UTC(+y!, +mo! - 1, +d!, +h!, +mi!, +sec!, ms));
  return date.getUTCMonth() === +mo! - 1 && date.getUTCDate() === +d! ? date : null;
}

const mkd: Command = {
  needsArg: true,
  async run(c, arg) {
    const path = c.resolve(arg);
    await c.files.mkdir(path);
    c.reply(257, `${quotePath(path)} created`);
  },
};

const rmd: Command = {
  needsArg: true,
  async run(c, arg) {
    const path = c.resolve(arg);
    await requireType(c, path, 'directory');
    await c.files.remove(path);
    c.reply(250, `/${path} removed`);
  },
};

/** fileCommands are DELE, MKD, RMD, RNFR, RNTO, SIZE, MDTM and MFMT. */
export const fileCommands: Record<string, Command> = {
  DELE: {
    needsArg: true,
    async run(c, arg) {
      const path = c.resolve(arg);
      await requireType(c, path, 'file');
      await c.files.remove(path);
      c.reply(250, `/${path} deleted`);
    },
  },
  MKD: mkd,
  XMKD: mkd,
  RMD: rmd,
  XRMD: rmd,
  RNFR: {
    needsArg: true,
    async run(c, arg) {
      const path = c.resolve(arg);
      await c.files.stat(path);
      c.renameFrom = path;
      c.reply(350, 'Ready for RNTO');
    },
  },
  RNTO: {
    needsArg: true,
    async run(c, arg) {
      const from = c.renameFrom;
      c.renameFrom = null;
      if (from === null) throw new ReplyError(503, 'Send RNFR first');
      const to = c.resolve(arg);
      // Rename over an existing file replaces it, as rename(2) does (WinSCP renames its
      // .filepart over the target); over a folder it is refused rather than deleting the tree.
      const existing = await c.files.stat(to).catch(() => null);
      if (existing?.type === 'directory') throw new ReplyError(550, `/${to} is an existing folder`);
      await c.files.move(from, to, { overwrite: existing !== null });
      c.reply(250, 'Rename successful');
    },
  },
  SIZE: {
    needsArg: true,
    async run(c, arg) {
      const entry = await requireType(c, c.resolve(arg), 'file');
      c.reply(213, String(entry.size ?? 0));
    },
  },
  MDTM: {
    needsArg: true,
    async run(c, arg) {
      const entry = await c.files.stat(c.resolve(arg));
      c.reply(213, ftpTime(entry.mtime));
    },
  },
  MFMT: {
    needsArg: true,
    async run(c, arg) {
      const space = arg.indexOf(' ');
      const time = space > 0 ? parseFtpTime(arg.slice(0, space)) : null;
      if (!time) throw new ReplyError(501, 'MFMT needs YYYYMMDDHHMMSS and a path');
      const path = c.resolve(arg.slice(space + 1));
      const entry = await c.files.setMtime(path, time);
      c.reply(213, `Modify=${ftpTime(entry.mtime)}; /${path}`);
    },
  },
};
