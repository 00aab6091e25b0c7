/**
 * The rest: FEAT, OPTS, SYST, STAT, NOOP, TYPE, MODE, STRU, HASH/XMD5/XCRC (from the md5 and
 * crc32 the core stored while the file was written), HELP, ALLO and CLNT.
 */
import { transferBytes, type Command, type FtpConnection } from '../connection.ts';
import { ReplyError } from '../errors.ts';
import { commands } from './index.ts';
import { lsLine } from './listing.ts';

/** FEATURES is what FEAT lists (RFC 2389); clients such as FileZilla and lftp use only what is here. */
export const FEATURES = [
  'UTF8',
  'EPSV',
  'EPRT',
  'PASV',
  'REST STREAM',
  'SIZE',
  'MDTM',
  'MFMT',
  'MLST type*;size*;modify*;perm*;unique*;',
  'AUTH TLS',
  'PBSZ',
  'PROT',
  'TVFS',
  'HASH MD5*;CRC32',
  'XMD5',
  'XCRC',
];

async function storedHash(c: FtpConnection, arg: string, algo: 'md5' | 'crc32') {
  const path = c.resolve(arg);
  const entry = await c.files.stat(path);
  if (entry.type !== 'file') throw new ReplyError(550, `/${path} is a folder, not a file`);
  const hash = entry[algo];
  if (!hash) throw new ReplyError(550, `No stored ${algo.toUpperCase()} for /${path}`);
  return { path, entry, hash };
}

/** miscCommands are the session-wide and informational commands. */
export const miscCommands: Record<string, Command> = {
  FEAT: {
    public: true,
    // EPRT is named only when active mode is on: lftp and FileZilla try what FEAT lists.
    run: (c) =>
      c.reply(211, ['Features:', ...FEATURES.filter((f) => f !== 'EPRT' || c.server.data.activeMode), 'End']),
  },
  OPTS: {
    public: true,
    needsArg: true,
    run(c, arg) {
      const [option = '', value = ''] = arg.split(/\s+/, 2);
      switch (option.toUpperCase()) {
        case 'UTF8':
        case 'UTF-8':
          // Names are always UTF-8; OFF is accepted but changes nothing.
          return c.reply(200, `UTF8 mode ${value.toUpperCase() === 'OFF' ? 'is always on' : 'enabled'}`);
        case 'MLST':
          return c.reply(200, 'MLST OPTS type;size;modify;perm;unique;');
        case 'HASH': {
          const algo = value.toUpperCase();
          if (algo === '') return c.reply(200, c.hashAlgo);
          if (algo !== 'MD5' && algo !== 'CRC32') throw new ReplyError(504, 'Supported: MD5, CRC32');
          c.hashAlgo = algo;
          return c.reply(200, algo);
        }
        default:
          throw new ReplyError(501, `Unknown option ${option}`);
      }
    },
  },
  SYST: { public: true, run: (c) => c.reply(215, 'UNIX Type: L8') },
  NOOP: { public: true, midTransfer: true, run: (c) => c.reply(200, 'NOOP ok') },
  HELP: {
    public: true,
    run: (c) => c.reply(214, ['The following commands are recognized:', ...helpLines(), 'Help OK']),
  },
  CLNT: { public: true, run: (c) => c.reply(200, 'Noted') },
  ALLO: { run: (c) => c.reply(202, 'No storage allocation necessary') },
  TYPE: {
    needsArg: true,
    run(c, arg) {
      // TYPE A is accepted for compatibility; bytes are sent as stored (no CRLF conversion).
      const type = arg.toUpperCase().replace(/\s+/g, ' ');
      if (['A', 'A N', 'I', 'L 8'].includes(type)) return c.reply(200, `Type set to ${type}`);
      throw new ReplyError(504, `Type ${arg} is not supported`);
    },
  },
  MODE: {
    needsArg: true,
    run(c, arg) {
      if (arg.toUpperCase() !== 'S') throw new ReplyError(504, 'Only stream mode (MODE S) is supported');
      c.reply(200, 'Mode set to S');
    },
  },
  STRU: {
    needsArg: true,
    run(c, arg) {
      if (arg.toUpperCase() !== 'F') throw new ReplyError(504, 'Only file structure (STRU F) is supported');
      c.reply(200, 'Structure set to F');
    },
  },
  STAT: {
    midTransfer: true,
    async run(c, arg) {
      if (arg === '') {
        const t = c.transfer;
        return c.reply(211, [
          'svc-gateway FTP server status:',
          `Logged in as ${c.principal?.user?.username ?? '?'}`,
          `TLS on control: ${c.tls ? 'yes' : 'no'}; data protection: ${c.protectData ? 'P' : 'C'}`,
          t ? `${t.command} /${t.path}: ${transferBytes(t)} bytes transferred` : 'No transfer in progress',
          'End of status',
        ]);
      }
      if (c.transfer) throw new ReplyError(450, 'STAT of a path waits until the transfer ends');
      const path = c.resolve(arg.replace(/^(-[a-zA-Z]+(\s+|$))+/, ''));
      const entry = await c.files.stat(path);
      const lines =
        entry.type === 'directory'
          ? (await c.files.list(path, { sort: 'path', direction: 'asc', offset: 0, limit: 1000 })).map((e) =>
              lsLine(e),
            )
          : [lsLine(entry)];
      c.reply(213, [`Status of /${path}:`, ...lines, 'End of status']);
    },
  },
  HASH: {
    needsArg: true,
    async run(c, arg) {
      // draft-bryan-ftpext-hash: `213 <algo> <first>-<last> <hash> <path>`.
      const algo = c.hashAlgo;
      const { entry, hash } = await storedHash(c, arg, algo === 'MD5' ? 'md5' : 'crc32');
      const size = entry.size ?? 0;
      c.reply(213, `${algo} 0-${size} ${hash} ${arg}`);
    },
  },
  XMD5: {
    needsArg: true,
    async run(c, arg) {
      c.reply(250, (await storedHash(c, arg, 'md5')).hash.toUpperCase());
    },
  },
  XCRC: {
    needsArg: true,
    async run(c, arg) {
      c.reply(250, (await storedHash(c, arg, 'crc32')).hash.toUpperCase());
    },
  },
};

function helpLines(): string[] {
  const names = Object.keys(commands).sort();
  const lines: string[] = [];
  for (let i = 0; i < names.length; i += 12) lines.push(names.slice(i, i + 12).join(' '));
  return lines;
}
