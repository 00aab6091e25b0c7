/**
 * WebDAV as sync clients and mounted drives use it (issue 18): modification times kept (X-OC-Mtime,
 * ownCloud's DAV:lastmodified, Explorer's Win32LastModifiedTime) and shown by every protocol, the
 * stored MD5 offered as ownCloud's oc:checksums so rclone moves nothing twice, the request
 * sequences Windows Explorer (MS-WDV) and macOS Finder send, and failures an operator can see.
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { dbKind } from '../../helpers/gateway.ts';
import { captureLogs, type LogCapture } from '../../helpers/logs.ts';
import { ALICE, lockBody, multistatus, rcloneFlags, run, startDav, type DavFixture } from './fixture.ts';

const OC = 'http://owncloud.org/ns';
const md5 = (data: string | Buffer) => createHash('md5').update(data).digest('hex');

/** rclone's PROPPATCH of the modification time, with the checksum it sets beside it (owncloud vendor). */
const lastmodifiedPatch = (seconds: number, checksum?: string) =>
  `<?xml version="1.0" encoding="utf-8" ?>
<D:propertyupdate xmlns:D="DAV:" xmlns:oc="http://owncloud.org/ns">
 <D:set>
  <D:prop>
   <lastmodified xmlns="DAV:">${seconds}</lastmodified>${
     checksum === undefined
       ? ''
       : `
   <oc:checksums>
\t<oc:checksum>${checksum}</oc:checksum>
   </oc:checksums>`
   }
  </D:prop>
 </D:set>
</D:propertyupdate>
`;

/** rclone's PROPFIND body in owncloud vendor mode. */
const OWNCLOUD_PROPS = `<?xml version="1.0"?>
<d:propfind  xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns" xmlns:nc="http://nextcloud.org/ns">
 <d:prop>
  <d:displayname />
  <d:getlastmodified />
  <d:getcontentlength />
  <d:resourcetype />
  <oc:checksums />
  <oc:permissions />
 </d:prop>
</d:propfind>
`;

const GETLASTMODIFIED = '{DAV:}getlastmodified';

/** props asks PROPFIND for `body` and parses the multistatus of one resource. */
async function props(f: DavFixture, urlPath: string, body: string, headers: Record<string, string> = {}) {
  const r = await f.dav('PROPFIND', urlPath, { headers: { Depth: '0', ...headers }, body });
  expect(r.status, r.text).to.equal(207);
  return [...multistatus(r.text).values()][0]!;
}

/** restMtime is the file's `mtime` as the REST API shows it (site path under alice's root). */
async function restMtime(f: DavFixture, userPath: string): Promise<number> {
  const site = `home/alice/${userPath}`.split('/').map(encodeURIComponent).join('/');
  const r = await f.gw.request('GET', `/api/rest/v1/files/${site}?action=stat`, {
    headers: { 'X-SvcAPI-Key': f.gw.siteKey },
  });
  expect(r.status, r.text).to.equal(200);
  return Date.parse(r.json.mtime as string);
}

/** mlsdModify is the `modify` fact FTP MLSD lists for a file. */
async function mlsdModify(f: DavFixture, folder: string, name: string): Promise<string | undefined> {
  const r = await run('curl', [
    '-sS',
    '-u',
    `${ALICE[0]}:${ALICE[1]}`,
    '-X',
    'MLSD',
    `ftp://127.0.0.1:${f.gw.ports.ftp}/${encodeURIComponent(folder)}/`,
  ]);
  const line = r.stdout.split(/\r?\n/).find((l) => l.endsWith(` ${name}`));
  return /modify=(\d{14})/.exec(line ?? '')?.[1];
}

describe(`WebDAV for sync clients and mounted drives (${dbKind})`, () => {
  let f: DavFixture;
  let tmp: string;
  before(async () => {
    f = await startDav({ ftp: true });
    tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-dav-mounts-'));
  });
  after(async () => {
    await f?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  const lastModified = async (urlPath: string) =>
    (await props(f, urlPath, OWNCLOUD_PROPS)).get(GETLASTMODIFIED)!.text;

  describe('modification times', () => {
    before(async () => {
      expect((await f.dav('MKCOL', '/mt')).status).to.equal(201);
    });

    it('keeps the X-OC-Mtime of a PUT (fractional seconds too) and shows it over WebDAV, REST and FTP', async () => {
      for (const [mtime, status, shown] of [
        ['1700000000.25', 201, 'Tue, 14 Nov 2023 22:13:20 GMT'],
        ['1600000000', 204, 'Sun, 13 Sep 2020 12:26:40 GMT'],
      ] as const) {
        const put = await f.dav('PUT', '/mt/a.txt', { body: shown, headers: { 'X-OC-Mtime': mtime } });
        expect(put.status).to.equal(status);
        expect(put.headers['x-oc-mtime']).to.equal('accepted');
        expect(await lastModified('/mt/a.txt')).to.equal(shown);
        expect(await restMtime(f, 'mt/a.txt')).to.equal(Number(mtime) * 1000);
        expect(await mlsdModify(f, 'mt', 'a.txt')).to.equal(
          new Date(Number(mtime) * 1000).toISOString().replace(/\D/g, '').slice(0, 14),
        );
      }

      // Without the header the upload's own time is kept, and nothing is claimed.
      const plain = await f.dav('PUT', '/mt/a.txt', { body: 'third' });
      expect(plain.headers['x-oc-mtime']).to.equal(undefined);
      expect(Date.now() - (await restMtime(f, 'mt/a.txt'))).to.be.within(-5_000, 60_000);
    });

    it('refuses an X-OC-Mtime that is not unix seconds with 400 and keeps the file', async () => {
      for (const bad of ['yesterday', '1e9', '17000000000000000', '12:00']) {
        const r = await f.dav('PUT', '/mt/a.txt', { body: 'changed', headers: { 'X-OC-Mtime': bad } });
        expect(r.status, bad).to.equal(400);
      }
      expect((await f.dav('GET', '/mt/a.txt')).text).to.equal('third');
    });

    it('sets the mtime by PROPPATCH of DAV:lastmodified as rclone sends it, with and without its checksum', async () => {
      await f.dav('PUT', '/mt/b.txt', { body: 'bee' });
      for (const [seconds, checksum] of [
        [1500000000, undefined],
        [1400000000, `MD5:${md5('bee')}`],
        [1300000000, `SHA1:${createHash('sha1').update('bee').digest('hex')}`],
      ] as const) {
        const r = await f.dav('PROPPATCH', '/mt/b.txt', { body: lastmodifiedPatch(seconds, checksum) });
        expect(r.status).to.equal(207);
        const result = multistatus(r.text).get('/mt/b.txt')!;
        expect(result.get('{DAV:}lastmodified')!.status, r.text).to.equal(200);
        if (checksum) expect(result.get(`{${OC}}checksums`)!.status, r.text).to.equal(200);
        expect(await restMtime(f, 'mt/b.txt')).to.equal(seconds * 1000);
      }
      expect(await mlsdModify(f, 'mt', 'b.txt')).to.equal('20110313070640');
      expect(await lastModified('/mt/b.txt')).to.equal('Sun, 13 Mar 2011 07:06:40 GMT');
    });

    it('refuses a PROPPATCH whose MD5 contradicts the content, or whose time is not one, changing nothing', async () => {
      const wrong = await f.dav('PROPPATCH', '/mt/b.txt', {
        body: lastmodifiedPatch(1200000000, `MD5:${md5('not bee')}`),
      });
      expect(wrong.status).to.equal(207);
      const result = multistatus(wrong.text).get('/mt/b.txt')!;
      expect(result.get(`{${OC}}checksums`)!.status).to.equal(409);
      expect(result.get('{DAV:}lastmodified')!.status).to.equal(424);
      const notATime = await f.dav('PROPPATCH', '/mt/b.txt', {
        body: lastmodifiedPatch(1200000000).replace('1200000000', 'soon'),
      });
      expect(multistatus(notATime.text).get('/mt/b.txt')!.get('{DAV:}lastmodified')!.status).to.equal(409);
      expect(await restMtime(f, 'mt/b.txt')).to.equal(1_300_000_000_000);
    });

    it('offers the stored MD5 as oc:checksums to the PROPFIND rclone sends (owncloud vendor)', async () => {
      await f.dav('PUT', '/mt/c.bin', { body: Buffer.alloc(4096, 7) });
      const r = await f.dav('PROPFIND', '/mt/', { headers: { Depth: '1' }, body: OWNCLOUD_PROPS });
      expect(r.status).to.equal(207);
      const listing = multistatus(r.text);
      const file = listing.get('/mt/c.bin')!;
      expect(file.get(`{${OC}}checksums`)!.status).to.equal(200);
      const inner = file.get(`{${OC}}checksums`)!.el.children.filter((c) => typeof c !== 'string');
      expect(inner.map((c) => `{${c.ns}}${c.name}`)).to.deep.equal([`{${OC}}checksum`]);
      expect(file.get(`{${OC}}checksums`)!.text).to.equal(`MD5:${md5(Buffer.alloc(4096, 7))}`);
      // What the gateway does not have is a 404 propstat, which rclone skips.
      expect(file.get(`{${OC}}permissions`)!.status).to.equal(404);
      expect(file.get(GETLASTMODIFIED)!.status).to.equal(200);
      expect(listing.get('/mt/')!.get(`{${OC}}checksums`)!.status).to.equal(404);
    });
  });

  describe('rclone (webdav remote, vendor owncloud)', () => {
    const files = 50;
    let src: string;
    let flags: string[];
    before(async () => {
      src = path.join(tmp, 'rclone-sync');
      for (let i = 0; i < files; i++) {
        const dir = path.join(src, `dir${i % 5}`);
        mkdirSync(dir, { recursive: true });
        const file = path.join(dir, `file ${i}.txt`);
        writeFileSync(file, `content ${i}\n`.repeat(i + 1));
        // Whole and fractional seconds, days apart, all in the past.
        const t = 1_600_000_000 + i * 86_400 + (i % 2 ? 0.5 : 0);
        utimesSync(file, t, t);
      }
      flags = await rcloneFlags(f, ['--webdav-vendor', 'owncloud']);
    });

    /** sync runs `rclone sync -v` and counts the files it copied. */
    const sync = async () => {
      const r = await run('rclone', ['sync', src, ':webdav:synced', '-v', '--stats', '0', ...flags], {
        timeoutMs: 120_000,
      });
      expect(r.code, r.stderr).to.equal(0);
      return { copied: (r.stderr.match(/: Copied \(/g) ?? []).length, log: r.stderr };
    };

    it('syncs 50 files, then a second sync transfers 0 and rclone check finds 0 differences', async function () {
      this.timeout(180_000);
      const first = await sync();
      expect(first.copied, first.log).to.equal(files);
      const second = await sync();
      expect(second.copied, second.log).to.equal(0);
      expect(second.log).to.match(/There was nothing to transfer/);
      const check = await run('rclone', ['check', src, ':webdav:synced', ...flags], { timeoutMs: 120_000 });
      expect(check.code, check.stderr).to.equal(0);
      expect(check.stderr).to.match(/ 0 differences found/);
      expect(check.stderr).to.match(new RegExp(` ${files} matching files`));
      // The comparison used the MD5 the gateway offers, not sizes alone.
      expect(check.stderr).not.to.match(/No common hash/i);
    });

    it('lists with rclone lsl the modification times of the source, to the second', async function () {
      this.timeout(60_000);
      const r = await run('rclone', ['lsl', ':webdav:synced', ...flags], { env: { TZ: 'UTC' } });
      expect(r.code, r.stderr).to.equal(0);
      const lines = r.stdout.trim().split('\n');
      expect(lines).to.have.length(files);
      for (const line of lines) {
        const m = /^\s*(\d+) (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.\d+ (.+)$/.exec(line)!;
        const local = statSync(path.join(src, m[3]!));
        expect(Number(m[1]), line).to.equal(local.size);
        const listed = Date.parse(`${m[2]!.replace(' ', 'T')}Z`);
        expect(listed, line).to.equal(Math.floor(local.mtimeMs / 1000) * 1000);
      }
    });
  });
});

describe(`WebDAV as Explorer, Finder and an operator see it (${dbKind})`, () => {
  let f: DavFixture;
  before(async () => {
    f = await startDav({ ftp: true });
  });
  after(async () => {
    await f?.stop();
  });

  describe('Windows Explorer (MS-WDV)', () => {
    const explorer = { 'User-Agent': 'Microsoft-WebDAV-MiniRedir/10.0.19045', Translate: 'f' };
    const win32 =
      '<?xml version="1.0" encoding="utf-8" ?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:schemas-microsoft-com:"><D:set><D:prop>' +
      '<Z:Win32CreationTime>Wed, 07 Jan 2026 08:00:00 GMT</Z:Win32CreationTime>' +
      '<Z:Win32LastAccessTime>Thu, 08 Jan 2026 08:00:00 GMT</Z:Win32LastAccessTime>' +
      '<Z:Win32LastModifiedTime>Tue, 06 Jan 2026 17:45:12 GMT</Z:Win32LastModifiedTime>' +
      '<Z:Win32FileAttributes>00000020</Z:Win32FileAttributes>' +
      '</D:prop></D:set></D:propertyupdate>';
    const MS = 'urn:schemas-microsoft-com:';

    it('saves a new file: PROPFIND, LOCK, 0-byte PUT and real PUT under the lock, Win32 PROPPATCH, UNLOCK', async () => {
      expect((await f.dav('MKCOL', '/win', { headers: explorer })).status).to.equal(201);
      const target = '/win/Quarterly%20Report.docx';
      expect((await f.dav('PROPFIND', target, { headers: { ...explorer, Depth: '0' } })).status).to.equal(
        404,
      );
      const lock = await f.dav('LOCK', target, {
        headers: { ...explorer, Timeout: 'Second-3600' },
        body: lockBody('exclusive', 'DESKTOP-1\\user'),
      });
      expect(lock.status).to.equal(201);
      const token = /^<(.+)>$/.exec(String(lock.headers['lock-token']))![1]!;
      const underLock = { ...explorer, If: `(<${token}>)` };
      // Explorer reserves the name with an empty file, then writes the content, both under its lock.
      expect((await f.dav('PUT', target, { headers: underLock, body: '' })).status).to.equal(204);
      const content = Buffer.alloc(20_000, 'w');
      expect((await f.dav('PUT', target, { headers: underLock, body: content })).status).to.equal(204);
      // Another client without the token is kept out meanwhile.
      expect((await f.dav('PUT', target, { body: 'other' })).status).to.equal(423);
      const patched = await f.dav('PROPPATCH', target, { headers: underLock, body: win32 });
      expect(patched.status).to.equal(207);
      const statuses = multistatus(patched.text).get(target)!;
      for (const name of [
        'Win32CreationTime',
        'Win32LastAccessTime',
        'Win32LastModifiedTime',
        'Win32FileAttributes',
      ])
        expect(statuses.get(`{${MS}}${name}`)?.status, name).to.equal(200);
      expect(
        (await f.dav('UNLOCK', target, { headers: { ...explorer, 'Lock-Token': `<${token}>` } })).status,
      ).to.equal(204);

      const after = await props(f, target, '<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>', explorer);
      expect(after.get('{DAV:}getlastmodified')!.text).to.equal('Tue, 06 Jan 2026 17:45:12 GMT');
      expect(after.get('{DAV:}getcontentlength')!.text).to.equal('20000');
      expect(after.get(`{${MS}}Win32FileAttributes`)!.text).to.equal('00000020');
      expect(after.has('{DAV:}lockdiscovery')).to.equal(false);
      const got = await f.dav('GET', target, { headers: explorer });
      expect(got.status).to.equal(200);
      expect(got.body.equals(content)).to.equal(true);
      expect(await mlsdModify(f, 'win', 'Quarterly Report.docx')).to.equal('20260106174512');
    });
  });

  describe('macOS Finder', () => {
    const finder = { 'User-Agent': 'WebDAVFS/3.0.0 (03008000) Darwin/22.1.0 (arm64)' };
    const quotaProps =
      '<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:prop>' +
      '<D:getlastmodified/><D:getcontentlength/><D:resourcetype/>' +
      '<D:quota-available-bytes/><D:quota-used-bytes/>' +
      '<A:executable xmlns:A="http://apache.org/dav/props/"/></D:prop></D:propfind>';

    it('keeps ._ AppleDouble files and .DS_Store as ordinary files: PUT, PROPFIND, GET, DELETE', async () => {
      expect((await f.dav('MKCOL', '/mac', { headers: finder })).status).to.equal(201);
      // An AppleDouble header (magic 0x00051607, version 2) with nothing after it.
      const appleDouble = Buffer.concat([Buffer.from([0, 5, 22, 7, 0, 2, 0, 0]), Buffer.alloc(74)]);
      const files: Record<string, Buffer> = {
        'photo.jpg': Buffer.alloc(3000, 1),
        '._photo.jpg': appleDouble,
        '.DS_Store': Buffer.from('Bud1\0\0\0\x01'),
      };
      for (const [name, data] of Object.entries(files)) {
        expect(
          (await f.dav('PROPFIND', `/mac/${name}`, { headers: { ...finder, Depth: '0' } })).status,
        ).to.equal(404);
        expect((await f.dav('PUT', `/mac/${name}`, { headers: finder, body: data })).status, name).to.equal(
          201,
        );
      }
      const r = await f.dav('PROPFIND', '/mac/', { headers: { ...finder, Depth: '1' }, body: quotaProps });
      const listing = multistatus(r.text);
      for (const [name, data] of Object.entries(files)) {
        expect(listing.get(`/mac/${name}`)?.get('{DAV:}getcontentlength')?.text, name).to.equal(
          String(data.length),
        );
        expect((await f.dav('GET', `/mac/${name}`, { headers: finder })).body.equals(data), name).to.equal(
          true,
        );
      }
      for (const name of ['._photo.jpg', '.DS_Store'])
        expect((await f.dav('DELETE', `/mac/${name}`, { headers: finder })).status, name).to.equal(204);
      const left = multistatus(
        (await f.dav('PROPFIND', '/mac/', { headers: { ...finder, Depth: '1' } })).text,
      );
      expect([...left.keys()]).to.have.members(['/mac/', '/mac/photo.jpg']);
    });

    it('answers quota-used-bytes and quota-available-bytes with real figures, and 404 for an unknown property', async () => {
      const before = await props(f, '/', quotaProps, finder);
      const used = Number(before.get('{DAV:}quota-used-bytes')!.text);
      expect(
        (await f.dav('PUT', '/mac/more.bin', { headers: finder, body: Buffer.alloc(12_345) })).status,
      ).to.equal(201);
      const after = await props(f, '/', quotaProps, finder);
      expect(after.get('{DAV:}quota-used-bytes')!.status).to.equal(200);
      expect(Number(after.get('{DAV:}quota-used-bytes')!.text)).to.equal(used + 12_345);
      const available = after.get('{DAV:}quota-available-bytes')!;
      expect(available.status).to.equal(200);
      const disk = await statfs(f.gw.config.data_dir);
      expect(Number(available.text)).to.be.closeTo(disk.bavail * disk.bsize, 64 * 1024 * 1024);
      expect(after.get('{http://apache.org/dav/props/}executable')!.status).to.equal(404);
    });
  });

  describe('failed requests in the log', () => {
    let capture: LogCapture;
    let lines: Record<string, unknown>[];
    before(() => {
      capture = captureLogs(f.gw.core);
      lines = capture.lines;
    });
    after(() => capture.stop());

    it('logs each failure but "not found" once at info, with user, interface, path and status', async () => {
      await f.dav('MKCOL', '/logs');
      await f.dav('PUT', '/logs/locked.txt', { body: 'v1' });
      const lock = await f.dav('LOCK', '/logs/locked.txt', { body: lockBody() });
      expect(lock.status).to.equal(200);
      lines.length = 0;
      expect((await f.dav('PUT', '/logs/locked.txt', { body: 'v2' })).status).to.equal(423);
      expect((await f.dav('MKCOL', '/logs')).status).to.equal(405);
      expect((await f.dav('GET', '/logs/missing.txt')).status).to.equal(404);
      expect((await f.dav('PROPFIND', '/logs/', { auth: null, headers: { Depth: '0' } })).status).to.equal(
        401,
      );
      await new Promise((resolve) => setImmediate(resolve));
      const failures = lines.filter((l) => l.message === 'request failed');
      expect(failures.map((l) => [l.level, l.user, l.interface, l.method, l.path, l.status])).to.deep.equal([
        ['info', 'alice', 'dav', 'PUT', '/logs/locked.txt', 423],
        ['info', 'alice', 'dav', 'MKCOL', '/logs', 405],
      ]);
    });
  });
});
