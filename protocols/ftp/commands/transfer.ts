/**
 * Transfer commands: the data-connection setup (PASV, EPSV, PORT, EPRT), REST, RETR, STOR, APPE
 * and ABOR. A transfer sends 150 before waiting for the data connection, runs beside the command
 * loop, and ends with 226, or 426 when it was aborted or the connection broke. An upload is one
 * core write that commits only when its data connection ended normally (DESIGN.md "Uploads").
 */
import { Readable, Transform } from 'node:stream';
import { GatewayError, readBytes } from '../../../src/core/index.ts';
import { finished, pipeline } from 'node:stream/promises';
import net from 'node:net';
import type { Command, FtpConnection, Transfer } from '../connection.ts';
import { plainAddress } from '../data.ts';
import { ReplyError } from '../errors.ts';

/** counter counts the bytes of a transfer for STAT. */
function counter(t: Transfer): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      t.bytes += chunk.length;
      done(null, chunk);
    },
  });
}

/** sendOverData sends 150, opens the data connection and streams `produce` through it, then 226. */
export function sendOverData(
  c: FtpConnection,
  command: string,
  path: string,
  opening: string,
  produce: () => AsyncIterable<string | Buffer>,
): void {
  c.runTransfer(command, path, async (t) => {
    c.reply(150, opening);
    const socket = await c.data.open(c.tls && c.protectData, t.controller.signal);
    await pipeline(Readable.from(produce()), counter(t), socket, { signal: t.controller.signal });
    c.reply(226, 'Transfer complete');
  });
}

/**
 * settled passes an upload's bytes on and ends only once the control connection has had its say:
 * a client killed mid-upload closes its data connection normally (FIN) and its control connection
 * at the same moment, and the end of the data must not win the race and complete a truncated file.
 * A transfer aborted meanwhile (control connection lost, ABOR) fails the stream: a cut.
 */
function settled(t: Transfer): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      done(null, chunk);
    },
    flush(done) {
      // Two turns of the event loop: the control connection's end, read in the same poll as the
      // data's, is handled by then. The core checks the abort again once the bytes are stored.
      setImmediate(() =>
        setImmediate(() => done(t.controller.signal.aborted ? new Error('the transfer was aborted') : null)),
      );
    },
  });
}

function retr(): Command {
  return {
    needsArg: true,
    async run(c, arg) {
      const path = c.resolve(arg);
      const start = c.restOffset;
      const download = await c.files.openRead(path, start > 0 ? { range: { start } } : {});
      c.runTransfer('RETR', path, async (t) => {
        try {
          const size = (download.entry.size ?? 0) - start;
          c.reply(150, `Opening BINARY mode data connection for /${path} (${size} bytes)`);
          const socket = await c.data.open(c.tls && c.protectData, t.controller.signal);
          const whole = readBytes(download.stream);
          if (whole) {
            // A small file the store read whole: one write and the end, no pipeline of streams.
            socket.end(whole);
            await finished(socket, { readable: false, signal: t.controller.signal }).catch((err: unknown) => {
              socket.destroy();
              throw err;
            });
            t.bytes += whole.length;
          } else {
            // Straight into the socket, which counts the bytes: the core's stream then sends
            // through buffers it reuses (a Transform between would take each buffer as its own).
            const before = socket.bytesWritten;
            t.measure = () => socket.bytesWritten - before;
            await pipeline(download.stream, socket, { signal: t.controller.signal });
          }
          c.reply(226, 'Transfer complete');
        } finally {
          download.stream.destroy();
        }
      });
    },
  };
}

function store(mode: 'STOR' | 'APPE'): Command {
  return {
    needsArg: true,
    async run(c, arg) {
      const path = c.resolve(arg);
      const offset = c.restOffset;
      // Checked before the 150 (rights, locks, parent, offset), so a client is told at once rather
      // than after sending the bytes. The handle holds nothing until its bytes arrive.
      const upload = await c.files.openWrite(
        path,
        mode === 'APPE' ? { append: true } : offset > 0 ? { offset } : {},
      );
      c.runTransfer(mode, path, async (t) => {
        c.reply(150, `Opening BINARY mode data connection for /${path}`);
        const socket = await c.data.open(c.tls && c.protectData, t.controller.signal);
        // Only a data connection that ended normally (FIN, or TLS close) ends `body`; a reset or a
        // close before the end destroys it: the file is unchanged, and the core keeps what arrived
        // as the user's pending version, which SIZE then reports and REST+STOR or APPE resume.
        const body = counter(t);
        const received = pipeline(socket, settled(t), body).catch(() => undefined);
        try {
          await upload.send(body, { signal: t.controller.signal });
        } catch (err) {
          if (c.data.lost)
            throw new ReplyError(
              426,
              'The data connection broke; the file is unchanged, what arrived is kept for resuming',
            );
          // The core drains the rest of a refused body: let the client finish sending, then tell
          // it (lftp cut off mid-send takes the reset for a network error, reconnects and resumes).
          if (err instanceof GatewayError && err.type === 'processing-failure/insufficient-storage')
            await received;
          throw err;
        }
        c.reply(226, 'Transfer complete');
      });
    },
  };
}

function passiveAddress(c: FtpConnection): string {
  const address = c.server.passiveAddress || plainAddress(c.socket.localAddress);
  if (!net.isIPv4(address)) throw new ReplyError(425, 'PASV needs IPv4; use EPSV');
  return address;
}

/** transferCommands are PASV, EPSV, PORT, EPRT, REST, RETR, STOR, APPE and ABOR. */
export const transferCommands: Record<string, Command> = {
  PASV: {
    async run(c) {
      if (c.epsvAll) throw new ReplyError(501, 'EPSV ALL was sent: use EPSV');
      const address = passiveAddress(c);
      const port = await c.data.listen();
      c.reply(227, `Entering Passive Mode (${address.replace(/\./g, ',')},${port >> 8},${port & 255})`);
    },
  },
  EPSV: {
    async run(c, arg) {
      if (arg.toUpperCase() === 'ALL') {
        c.epsvAll = true;
        return c.reply(200, 'EPSV ALL accepted');
      }
      if (arg !== '' && arg !== '1' && arg !== '2')
        throw new ReplyError(522, 'Network protocol not supported, use (1,2)');
      const port = await c.data.listen();
      c.reply(229, `Entering Extended Passive Mode (|||${port}|)`);
    },
  },
  PORT: {
    needsArg: true,
    run(c, arg) {
      if (c.epsvAll) throw new ReplyError(501, 'EPSV ALL was sent: use EPSV');
      const parts = arg.split(',').map((p) => Number(p.trim()));
      if (parts.length !== 6 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255))
        throw new ReplyError(501, 'PORT needs h1,h2,h3,h4,p1,p2');
      c.data.setActive(parts.slice(0, 4).join('.'), parts[4]! * 256 + parts[5]!);
      c.reply(200, 'PORT command successful');
    },
  },
  EPRT: {
    needsArg: true,
    run(c, arg) {
      if (c.epsvAll) throw new ReplyError(501, 'EPSV ALL was sent: use EPSV');
      const delimiter = arg[0] ?? '|';
      const [, proto, host, port] = arg.split(delimiter);
      if (!host || !port || !['1', '2'].includes(proto ?? '') || !net.isIP(host) || !/^\d+$/.test(port))
        throw new ReplyError(501, 'EPRT needs |protocol|address|port|');
      c.data.setActive(host, Number(port));
      c.reply(200, 'EPRT command successful');
    },
  },
  REST: {
    needsArg: true,
    run(c, arg) {
      // Offsets are 64-bit in FTP; a Number is exact up to 2^53, far beyond any file here.
      if (!/^\d{1,16}$/.test(arg)) throw new ReplyError(501, 'REST needs a byte offset');
      c.restOffset = Number(arg);
      c.reply(350, `Restarting at ${arg}; send STOR or RETR`);
    },
  },
  RETR: retr(),
  STOR: store('STOR'),
  APPE: store('APPE'),
  ABOR: {
    midTransfer: true,
    async run(c) {
      const t = c.transfer;
      c.data.release();
      if (!t) return c.reply(226, 'No transfer to abort');
      t.controller.abort();
      await t.done;
      c.reply(226, 'Abort successful');
    },
  },
};
