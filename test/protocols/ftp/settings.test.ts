/**
 * The FTP settings and the stored-hash commands, from the wire: the idle timeout (421 and close,
 * never during a transfer), require_tls (no login before AUTH TLS), PORT/EPRT refused by default
 * and working with active_mode (curl --ftp-port), HASH/XMD5/XCRC answered from the md5 and crc32
 * the core stored.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { expect } from 'chai';
import { dbKind, type TestGateway } from '../../helpers/gateway.ts';
import {
  createFtpUser,
  curlFtp,
  lftp,
  md5,
  RawControl,
  readSiteFile,
  startFtpGateway,
  writeSiteFile,
} from './clients.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function connectData(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host: '127.0.0.1' }, () => resolve(s));
    s.once('error', reject);
  });
}

/** readAll resumes a data socket and collects everything until it ends. */
function readAll(s: net.Socket): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    s.on('data', (c: Buffer) => chunks.push(c));
    s.once('end', () => resolve(Buffer.concat(chunks)));
    s.once('error', reject);
    s.resume();
  });
}

describe(`FTP idle timeout (${dbKind})`, function () {
  this.timeout(30_000);
  let gw: TestGateway;

  before(async () => {
    gw = await startFtpGateway({ ftp: { idle_timeout_seconds: 1 } });
    await createFtpUser(gw.core, 'idler');
  });
  after(() => gw?.stop());

  it('closes an idle control connection with 421', async () => {
    const c = await RawControl.connect(gw.ports.ftp!);
    expect(await c.login('idler')).to.match(/^230/);
    const started = Date.now();
    expect(await c.reply(5_000)).to.match(/^421 /);
    await sleep(200);
    expect(c.closed).to.equal(true);
    expect(Date.now() - started).to.be.within(500, 4_000);
  });

  it('does not time out during a transfer, and does after it', async () => {
    // More than the kernel can buffer between the two sockets (here send buffers reach 4 MiB and
    // receive buffers 32 MiB): 4 MiB fitted whole, so the transfer ended while the client paused.
    const data = randomBytes(64 * 1024 * 1024);
    await writeSiteFile(gw.core, 'home/idler/slow.bin', data);
    const c = await RawControl.connect(gw.ports.ftp!);
    await c.login('idler');
    const socket = await connectData(await c.pasvPort());
    socket.pause(); // the transfer stalls on backpressure while the control connection is silent
    expect(await c.send('RETR slow.bin')).to.match(/^150/);
    await sleep(2_500);
    expect(c.lines, 'nothing said during the transfer').to.deep.equal([]);
    expect(c.closed).to.equal(false);
    const got = await readAll(socket);
    expect(md5(got)).to.equal(md5(data));
    expect(await c.reply()).to.match(/^226/);
    // Idle again once the transfer is over.
    expect(await c.reply(5_000)).to.match(/^421 /);
    c.close();
  });

  it('does not time out during a slow upload (curl --limit-rate)', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-ftp-idle-'));
    try {
      const data = randomBytes(300_000);
      writeFileSync(path.join(dir, 'up.bin'), data);
      const r = await curlFtp(gw, 'plain', 'idler', 'up.bin', [
        '--limit-rate',
        '100K',
        '-T',
        path.join(dir, 'up.bin'),
      ]);
      expect(r.code, r.stderr).to.equal(0);
      expect(md5(await readSiteFile(gw.core, 'home/idler/up.bin'))).to.equal(md5(data));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe(`FTP require_tls (${dbKind})`, function () {
  this.timeout(30_000);
  let gw: TestGateway;

  before(async () => {
    gw = await startFtpGateway({ ftp: { require_tls: true } });
    await createFtpUser(gw.core, 'dave');
  });
  after(() => gw?.stop());

  it('refuses USER before AUTH TLS, and logs in after it', async () => {
    const c = await RawControl.connect(gw.ports.ftp!);
    expect(await c.send('USER dave')).to.match(/^530 .*AUTH TLS/);
    expect(await c.send('PASS secret-password-1')).to.match(/^503/);
    expect(await c.send('LIST')).to.match(/^530/);
    c.close();
    const plain = await curlFtp(gw, 'plain', 'dave', '', ['-l']);
    expect(plain.code).to.not.equal(0);
    expect(plain.stderr).to.match(/530|denied/i);
    const tls = await curlFtp(gw, 'explicit', 'dave', '', ['-l']);
    expect(tls.code, tls.stderr).to.equal(0);
    // Implicit FTPS is TLS from the first byte.
    const implicit = await curlFtp(gw, 'implicit', 'dave', '', ['-l']);
    expect(implicit.code, implicit.stderr).to.equal(0);
  });
});

describe(`FTP active mode on (${dbKind})`, function () {
  this.timeout(30_000);
  let gw: TestGateway;
  let dir: string;

  before(async () => {
    gw = await startFtpGateway({ ftp: { active_mode: true } });
    await createFtpUser(gw.core, 'frank');
    dir = mkdtempSync(path.join(os.tmpdir(), 'svc-ftp-act-'));
  });
  after(async () => {
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists EPRT in FEAT and transfers with curl --ftp-port (EPRT, and PORT)', async () => {
    const c = await RawControl.connect(gw.ports.ftp!);
    expect(await c.send('FEAT')).to.match(/^ EPRT$/m);
    await c.login('frank');
    // The data address must be the control connection's peer (no FTP bounce).
    expect(await c.send('PORT 10,0,0,1,117,48')).to.match(/^504/);
    c.close();
    const data = randomBytes(200_000);
    writeFileSync(path.join(dir, 'active.bin'), data);
    const up = await curlFtp(gw, 'plain', 'frank', 'active.bin', [
      '--ftp-port',
      '127.0.0.1',
      '-T',
      path.join(dir, 'active.bin'),
    ]);
    expect(up.code, up.stderr).to.equal(0);
    expect(md5(await readSiteFile(gw.core, 'home/frank/active.bin'))).to.equal(md5(data));
    for (const extra of [[], ['--disable-eprt']]) {
      const out = path.join(dir, `back${extra.length}.bin`);
      const down = await curlFtp(gw, 'plain', 'frank', 'active.bin', [
        '--ftp-port',
        '127.0.0.1',
        ...extra,
        '-o',
        out,
      ]);
      expect(down.code, down.stderr).to.equal(0);
      expect(md5(readFileSync(out))).to.equal(md5(data));
    }
  });

  it('transfers in active mode over TLS (lftp, PROT P)', async () => {
    // curl 7.87-7.88 cannot do active FTPS (curl/curl#10666), so lftp drives the TLS case.
    const data = randomBytes(150_000);
    await writeSiteFile(gw.core, 'home/frank/tls-active.bin', data);
    const out = path.join(dir, 'tls-active.bin');
    const r = await lftp(gw, 'explicit', 'frank', `get tls-active.bin -o ${out}`, {
      extra: 'set ftp:passive-mode no; debug 5',
    });
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stderr).to.match(/---> (EPRT|PORT) /);
    expect(md5(readFileSync(out))).to.equal(md5(data));
  });
});

describe(`FTP defaults: active mode off, stored hashes (${dbKind})`, function () {
  this.timeout(30_000);
  let gw: TestGateway;

  before(async () => {
    gw = await startFtpGateway();
    await createFtpUser(gw.core, 'erin');
  });
  after(() => gw?.stop());

  it('refuses PORT and EPRT, and does not list EPRT in FEAT', async () => {
    const c = await RawControl.connect(gw.ports.ftp!);
    expect(await c.send('FEAT')).to.not.match(/EPRT/);
    await c.login('erin');
    expect(await c.send('PORT 127,0,0,1,117,48')).to.match(/^502/);
    expect(await c.send('EPRT |1|127.0.0.1|30000|')).to.match(/^502/);
    c.close();
    const r = await curlFtp(gw, 'plain', 'erin', '', ['-l', '--ftp-port', '127.0.0.1']);
    expect(r.code).to.not.equal(0);
  });

  it('answers HASH, XMD5 and XCRC from the stored md5 and crc32', async () => {
    const data = Buffer.from('hash these bytes, please\n');
    await writeSiteFile(gw.core, 'home/erin/h.txt', data);
    await gw.core.namespace.mkdir(
      (await import('../../../src/core/index.ts')).operatorPrincipal(),
      'home/erin/folder',
    );
    const sum = md5(data);
    const crc = (crc32(data) >>> 0).toString(16).padStart(8, '0');
    const c = await RawControl.connect(gw.ports.ftp!);
    await c.login('erin');
    expect(await c.send('FEAT')).to.match(/^ HASH MD5\*;CRC32$/m);
    expect(await c.send('XMD5 h.txt')).to.equal(`250 ${sum.toUpperCase()}`);
    expect(await c.send('XCRC h.txt')).to.equal(`250 ${crc.toUpperCase()}`);
    expect(await c.send('HASH h.txt')).to.equal(`213 MD5 0-${data.length} ${sum} h.txt`);
    expect(await c.send('OPTS HASH CRC32')).to.equal('200 CRC32');
    expect(await c.send('HASH h.txt')).to.equal(`213 CRC32 0-${data.length} ${crc} h.txt`);
    expect(await c.send('OPTS HASH SHA-512')).to.match(/^504/);
    expect(await c.send('XMD5 folder')).to.match(/^550/);
    expect(await c.send('XMD5 missing.txt')).to.match(/^550/);
    c.close();
  });
});
