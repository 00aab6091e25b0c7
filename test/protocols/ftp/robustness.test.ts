/**
 * What no well-behaved client sends, over a raw control connection: commands split across TCP
 * writes, garbage and overlong lines, data connections without TLS session resumption, sessions
 * that open passive ports and never use them, and uploads cut by ABOR or a reset. None may crash
 * or wedge the server, leak a port, or change a file's content.
 */
import net from 'node:net';
import tls from 'node:tls';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { dbKind, type TestGateway } from '../../helpers/gateway.ts';
import { FtpClient } from '../../soak/ftp.ts';
import {
  createFtpUser,
  lftp,
  md5,
  PASSWORD,
  RawControl,
  readSiteFile,
  startFtpGateway,
  writeSiteFile,
} from './clients.ts';

// Below the kernel's ephemeral range (32768-60999), so outgoing connections never hold these ports.
const PASV_FIRST = 21_700;
const PASV_COUNT = 12;

function connectData(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1' }, () => resolve(s));
    s.once('error', reject);
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe(`FTP robustness (${dbKind})`, function () {
  this.timeout(60_000);
  let gw: TestGateway;

  before(async () => {
    gw = await startFtpGateway({
      ports: { ftp_pasv: `${PASV_FIRST}-${PASV_FIRST + PASV_COUNT - 1}` },
      // One user takes the whole range here on purpose (limits.test.ts tests the per-user bound).
      ftp: { data_timeout_seconds: 3, passive_listeners_per_user: PASV_COUNT },
    });
    await createFtpUser(gw.core, 'carol');
  });
  after(() => gw?.stop());

  it('reads a command split across two TCP writes, and bare LF line ends', async () => {
    const c = await RawControl.connect(gw.ports.ftp!);
    c.socket.write('US');
    await sleep(50);
    c.socket.write('ER carol\r');
    await sleep(50);
    c.socket.write('\n');
    expect(await c.reply()).to.match(/^331/);
    // A multi-byte character split between writes is decoded once the line is whole.
    const name = Buffer.from('MKD é\r\n');
    c.socket.write(`PASS ${'secret-password-1'}\n`);
    expect(await c.reply()).to.match(/^230/);
    c.socket.write(name.subarray(0, 5));
    await sleep(50);
    c.socket.write(name.subarray(5));
    expect(await c.reply()).to.equal('257 "/é" created');
    c.close();
  });

  it('answers garbage, invalid UTF-8 and overlong lines and keeps the session usable', async () => {
    const c = await RawControl.connect(gw.ports.ftp!);
    expect(await c.send('LIST')).to.match(/^530/);
    expect(await c.send('FEAT')).to.match(/^211-Features:[\s\S]*MLST[\s\S]*211 End$/);
    expect(await c.send('OPTS UTF8 ON')).to.match(/^200/);
    expect(await c.send('\u0001\u0002garbage')).to.match(/^502/);
    c.socket.write(Buffer.from([0x4d, 0x4b, 0x44, 0x20, 0xc3, 0x28, 0x0d, 0x0a]));
    expect(await c.reply()).to.match(/^501/);
    c.socket.write(`NOOP ${'x'.repeat(100_000)}\r\n`);
    expect(await c.reply()).to.match(/^500 .*too long/);
    expect(await c.login('carol')).to.match(/^230/);
    expect(await c.send('PWD')).to.equal('257 "/" is the current directory');
    expect(await c.send('MKD quo"te')).to.equal('257 "/quo""te" created');
    expect(await c.send('TYPE X')).to.match(/^504/);
    expect(await c.send('RETR')).to.match(/^501/);
    expect(await c.send('RNTO x')).to.match(/^503/);
    c.close();
  });

  it('refuses a TLS data connection that does not resume the control session (425)', async () => {
    const control = tls.connect({ port: gw.ports.ftps!, host: '127.0.0.1', rejectUnauthorized: false });
    await new Promise((r) => control.once('secureConnect', r));
    const lines: string[] = [];
    control.setEncoding('utf8');
    control.on('data', (d: string) => lines.push(...d.split('\r\n').filter(Boolean)));
    const next = async (prefix: string) => {
      for (let i = 0; i < 100 && !lines.some((l) => l.startsWith(prefix)); i++) await sleep(50);
      const found = lines.find((l) => l.startsWith(prefix));
      lines.length = 0;
      return found;
    };
    await next('220');
    control.write('USER carol\r\nPASS secret-password-1\r\n');
    expect(await next('230')).to.be.a('string');
    control.write('PBSZ 0\r\nPROT P\r\nEPSV\r\n');
    const epsv = await next('229');
    const port = Number(/\|\|\|(\d+)\|/.exec(epsv!)![1]);
    control.write('LIST\r\n');
    expect(await next('150')).to.be.a('string');
    // A fresh TLS session (no `session` offered) is not the control connection's.
    const data = tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false });
    data.on('error', () => undefined);
    expect(await next('425')).to.match(/resume the TLS session/);
    data.destroy();
    // The same with the control session offered is accepted.
    control.write('EPSV\r\n');
    const port2 = Number(/\|\|\|(\d+)\|/.exec((await next('229'))!)![1]);
    control.write('NLST\r\n');
    await next('150');
    const resumed = tls.connect({
      port: port2,
      host: '127.0.0.1',
      rejectUnauthorized: false,
      session: control.getSession()!,
    });
    const reused = new Promise<boolean>((r) =>
      resumed.once('secureConnect', () => r(resumed.isSessionReused())),
    );
    resumed.resume();
    expect(await next('226')).to.be.a('string');
    expect(await reused).to.equal(true);
    control.destroy();
  });

  it('releases passive ports of sessions that never transfer (the range stays usable)', async () => {
    // Three times the range: sessions that PASV twice, QUIT, or just drop the connection.
    for (let round = 0; round < 3; round++) {
      const sessions = await Promise.all(
        Array.from({ length: PASV_COUNT }, async () => {
          const c = await RawControl.connect(gw.ports.ftp!);
          await c.login('carol');
          return c;
        }),
      );
      const ports = await Promise.all(sessions.map((c) => c.pasvPort()));
      expect(new Set(ports).size).to.equal(PASV_COUNT);
      // Every port of the range is taken now: one more session is told so, without a crash.
      const extra = await RawControl.connect(gw.ports.ftp!);
      await extra.login('carol');
      expect(await extra.send('PASV')).to.match(/^425/);
      extra.close();
      // A second PASV releases the session's first port before taking one.
      expect(ports).to.include(await sessions[0]!.pasvPort());
      for (const [i, c] of sessions.entries()) {
        if (i % 2) c.close();
        else await c.send('QUIT');
      }
      await sleep(100);
    }
    // A failed transfer command (no data connection in time) releases its port too.
    const c = await RawControl.connect(gw.ports.ftp!);
    await c.login('carol');
    await c.pasvPort();
    expect(await c.send('LIST')).to.match(/^150/);
    expect(await c.reply()).to.match(/^425/);
    c.close();
    await sleep(100);
    const last = await Promise.all(
      Array.from({ length: PASV_COUNT }, async () => {
        const s = await RawControl.connect(gw.ports.ftp!);
        await s.login('carol');
        return s;
      }),
    );
    const free = await Promise.all(last.map((s) => s.pasvPort()));
    for (const s of last) s.close();
    expect(new Set(free).size).to.equal(PASV_COUNT);
  });

  it('keeps the old content when ABOR, a reset or a lost control connection cuts an upload', async () => {
    const old = 'the old content';
    await writeSiteFile(gw.core, 'home/carol/keep.txt', old);
    const startUpload = async () => {
      const c = await RawControl.connect(gw.ports.ftp!);
      await c.login('carol');
      const data = await connectData(await c.pasvPort());
      expect(await c.send('STOR keep.txt')).to.match(/^150/);
      data.write(randomBytes(200_000));
      await sleep(200);
      return { c, data };
    };
    // ABOR mid-upload: 426 for the transfer, then 226 for ABOR.
    const a = await startUpload();
    expect(await a.c.send('STAT')).to.match(/STOR \/keep\.txt: \d+ bytes transferred/);
    a.c.socket.write('ABOR\r\n');
    expect(await a.c.reply()).to.match(/^426/);
    expect(await a.c.reply()).to.match(/^226/);
    expect(await a.c.send('NOOP')).to.match(/^200/);
    a.c.close();
    expect((await readSiteFile(gw.core, 'home/carol/keep.txt')).toString()).to.equal(old);
    // A reset of the data connection.
    const b = await startUpload();
    b.data.resetAndDestroy();
    expect(await b.c.reply()).to.match(/^426/);
    b.c.close();
    expect((await readSiteFile(gw.core, 'home/carol/keep.txt')).toString()).to.equal(old);
    // The control connection lost mid-upload, then the data connection closed normally.
    const d = await startUpload();
    d.c.close();
    await sleep(200);
    d.data.end();
    await sleep(300);
    expect((await readSiteFile(gw.core, 'home/carol/keep.txt')).toString()).to.equal(old);
    // And a normal upload still commits.
    const e = await startUpload();
    e.data.end();
    expect(await e.c.reply()).to.match(/^226/);
    e.c.close();
    expect((await readSiteFile(gw.core, 'home/carol/keep.txt')).length).to.equal(200_000);
  });

  it('answers NOOP and STAT during a download, and ABOR stops it', async () => {
    await writeSiteFile(gw.core, 'home/carol/big.bin', randomBytes(8 * 1024 * 1024));
    const c = await RawControl.connect(gw.ports.ftp!);
    await c.login('carol');
    const data = await connectData(await c.pasvPort());
    data.pause(); // read nothing, so the transfer stays in progress
    expect(await c.send('RETR big.bin')).to.match(/^150/);
    expect(await c.send('NOOP')).to.match(/^200/);
    expect(await c.send('STAT')).to.match(/RETR \/big\.bin/);
    // Telnet IP and Synch before ABOR, as RFC 959 asks and some clients still send.
    c.socket.write(Buffer.concat([Buffer.from([0xff, 0xf4, 0xff, 0xf2]), Buffer.from('ABOR\r\n')]));
    expect(await c.reply()).to.match(/^426/);
    expect(await c.reply()).to.match(/^226/);
    data.destroy();
    c.close();
  });

  it('uploads over TLS 1.3 with lftp 20 times, every file whole', async function () {
    this.timeout(120_000);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-ftp13-'));
    try {
      const body = randomBytes(2 * 1024 * 1024);
      writeFileSync(path.join(dir, 'up.bin'), body);
      const script = Array.from(
        { length: 20 },
        (_, i) => `put ${path.join(dir, 'up.bin')} -o tls13-${i}.bin`,
      ).join('; ');
      const r = await lftp(gw, 'explicit', 'carol', script, {
        extra: 'set ssl:priority "NORMAL:-VERS-ALL:+VERS-TLS1.3"',
        timeoutMs: 100_000,
      });
      expect(r.code, r.stderr).to.equal(0);
      for (let i = 0; i < 20; i++)
        expect(md5(await readSiteFile(gw.core, `home/carol/tls13-${i}.bin`)), `upload ${i}`).to.equal(
          md5(body),
        );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('opens the next transfer at once after a TLS one (a late close of the last data connection releases nothing)', async () => {
    // Found by the soak: the TLS handshake wait of a data connection kept its 'close' listener,
    // and the socket's close after 226 released the channel, by then the next EPSV's listener
    // (ECONNREFUSED) or the next transfer's socket. Clients that send EPSV right after 226 (lftp,
    // FileZilla's queue) lost most FTPS transfers.
    for (const mode of ['explicit', 'implicit'] as const) {
      const port = mode === 'implicit' ? gw.ports.ftps! : gw.ports.ftp!;
      const c = await FtpClient.connect('127.0.0.1', port, mode, 'carol', PASSWORD);
      try {
        for (let i = 0; i < 10; i++) {
          const data = randomBytes(50_000);
          await c.list('/');
          await c.upload(`/quick-${mode}-${i}`, [data]);
          expect(await c.download(`/quick-${mode}-${i}`)).to.deep.equal({
            size: data.length,
            md5: md5(data),
          });
        }
      } finally {
        await c.quit();
      }
    }
  });

  it('closes every session with 421 on stop and leaves nothing running', async () => {
    const own = await startFtpGateway();
    await createFtpUser(own.core, 'dave');
    const c = await RawControl.connect(own.ports.ftp!);
    await c.login('dave');
    await c.pasvPort();
    const stopped = own.stop();
    expect(await c.reply()).to.match(/^421/);
    await stopped;
    expect(c.closed).to.equal(true);
  });
});
