/**
 * Listing commands: LIST (ls -l style), NLST (names), MLSD and MLST (RFC 3659 facts, times in
 * UTC). A listing streams page by page from the core, so a 10,000-entry folder is never one string.
 */
import { createHash } from 'node:crypto';
import { GatewayError, type Entry } from '../../../src/core/index.ts';
import type { Command, FtpConnection } from '../connection.ts';
import { sendOverData } from './transfer.ts';

const PAGE = 1000;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** ftpTime formats a time as RFC 3659's YYYYMMDDHHMMSS in UTC (MDTM, MLST, MFMT). */
export function ftpTime(d: Date): string {
  return d.toISOString().replace(/[-:T]/g, '').slice(0, 14);
}

const baseName = (path: string) => path.slice(path.lastIndexOf('/') + 1);

/** lsLine formats an entry like `ls -l` (what LIST clients parse), times in UTC. */
export function lsLine(e: Entry, now = Date.now()): string {
  const dir = e.type === 'directory';
  const d = e.mtime;
  const month = MONTHS[d.getUTCMonth()]!;
  const day = String(d.getUTCDate()).padStart(2, ' ');
  // ls shows the time for the last six months and the year otherwise.
  const recent = Math.abs(now - d.getTime()) < 180 * 86_400_000;
  const when = recent
    ? `${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`
    : ` ${d.getUTCFullYear()}`;
  const size = String(dir ? 4096 : (e.size ?? 0)).padStart(12);
  return `${dir ? 'drwxr-xr-x' : '-rw-r--r--'} 1 ftp ftp ${size} ${month} ${day} ${when} ${baseName(e.path)}`;
}

/**
 * mlsxFacts formats RFC 3659 facts. `perm` says what FTP could do with the entry; the core still
 * decides each operation (the adapter does not compute rights).
 */
export function mlsxFacts(e: Entry, name: string): string {
  const dir = e.type === 'directory';
  const unique = createHash('sha1').update(e.path).digest('hex').slice(0, 16);
  const facts = [
    `type=${dir ? 'dir' : 'file'}`,
    ...(dir ? [] : [`size=${e.size ?? 0}`]),
    `modify=${ftpTime(e.mtime)}`,
    `perm=${dir ? 'flcdmpe' : 'adfrw'}`,
    `unique=${unique}`,
  ];
  return `${facts.join(';')}; ${name}`;
}

/** listingArgument drops `ls` options such as `-a` or `-la` that clients put before the path. */
function listingArgument(arg: string): string {
  return arg.replace(/^(-[a-zA-Z]+(\s+|$))+/, '');
}

/**
 * readListing reads the first page before the 150 (so a missing folder is a plain 550) and
 * yields it and the following pages. A file yields itself, as `ls file` does.
 */
async function readListing(c: FtpConnection, path: string): Promise<AsyncGenerator<Entry>> {
  const pages = c.files.listAll(path, PAGE);
  let first: Entry[];
  try {
    first = (await pages.next()).value ?? [];
  } catch (err) {
    if (err instanceof GatewayError && err.type === 'bad-request/folder-must-not-be-a-file')
      return (async function* () {
        yield await c.files.stat(path);
      })();
    throw err;
  }
  return (async function* () {
    yield* first;
    for await (const page of pages) yield* page;
  })();
}

function listingCommand(name: string, format: (e: Entry) => string): Command {
  return {
    async run(c, arg) {
      const path = c.resolve(name === 'MLSD' ? arg : listingArgument(arg));
      const entries = await readListing(c, path);
      sendOverData(c, name, path, `Opening data connection for the listing of /${path}`, async function* () {
        let chunk = '';
        for await (const e of entries) {
          chunk += `${format(e)}\r\n`;
          if (chunk.length > 16_384) {
            yield chunk;
            chunk = '';
          }
        }
        if (chunk) yield chunk;
      });
    },
  };
}

/** listingCommands are LIST, NLST, MLSD and MLST. */
export const listingCommands: Record<string, Command> = {
  LIST: listingCommand('LIST', (e) => lsLine(e)),
  NLST: listingCommand('NLST', (e) => baseName(e.path)),
  MLSD: listingCommand('MLSD', (e) => mlsxFacts(e, baseName(e.path))),
  MLST: {
    async run(c, arg) {
      const path = c.resolve(arg);
      const entry = await c.files.stat(path);
      c.reply(250, [`Listing /${path}`, mlsxFacts(entry, `/${path}`), 'End']);
    },
  },
};
