/**
 * WebDAV driven by real clients: litmus (all five suites), cadaver, lftp, rclone, and curl replaying the
 * request sequences of macOS Finder and Windows Explorer.
 */
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dbKind } from '../../helpers/gateway.ts';
import { ALICE, hrefs, rcloneFlags, run, startDav, type DavFixture } from './fixture.ts';

describe(`WebDAV with real clients (${dbKind})`, () => {
  let f: DavFixture;
  let tmp: string;
  before(async () => {
    f = await startDav();
    tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-dav-clients-'));
  });
  after(async () => {
    await f?.stop();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  const curl = (args: string[], input?: string) =>
    run(
      'curl',
      ['-sS', '--cacert', f.certFile, '-u', `${ALICE[0]}:${ALICE[1]}`, ...args],
      input === undefined ? {} : { input },
    );
  const status = async (args: string[], input?: string) => {
    const r = await curl(['-o', '/dev/null', '-w', '%{http_code}', ...args], input);
    return Number(r.stdout);
  };
  const body = async (args: string[]) => (await curl(args)).stdout;
  const url = (p: string) => `https://localhost:${f.port}${p}`;

  it('passes every litmus suite (basic copymove props locks http) and stays up', async function () {
    this.timeout(180_000);
    // litmus (neon) does not verify the certificate; it tests the protocol.
    const r = await run('litmus', ['-k', `${f.url}/`, ...ALICE], { cwd: tmp, timeoutMs: 170_000 });
    const summaries = [
      ...r.stdout.matchAll(/<- summary for `(\w+)': of (\d+) tests run: (\d+) passed, (\d+) failed/g),
    ];
    const bySuite: Record<string, { run: number; failed: number }> = Object.fromEntries(
      summaries.map((m) => [m[1]!, { run: Number(m[2]), failed: Number(m[4]) }]),
    );
    expect(Object.keys(bySuite), r.stdout).to.deep.equal(['basic', 'copymove', 'props', 'locks', 'http']);
    for (const [suite, s] of Object.entries(bySuite)) expect(s.failed, `${suite}\n${r.stdout}`).to.equal(0);
    expect(r.stdout).not.to.match(/WARNING/);
    const alive = await f.dav('OPTIONS', '/', { auth: null });
    expect(alive.status).to.equal(200);
  });

  it('serves a cadaver session: ls, mkcol, put, get, lock, discover, unlock, propset, propget, cp, mv, rm', async function () {
    this.timeout(60_000);
    const home = path.join(tmp, 'cadaver-home');
    mkdirSync(home, { recursive: true });
    writeFileSync(path.join(home, '.netrc'), `machine 127.0.0.1\nlogin ${ALICE[0]}\npassword ${ALICE[1]}\n`, {
      mode: 0o600,
    });
    writeFileSync(path.join(tmp, 'up.txt'), 'hello from cadaver\n');
    const commands = [
      'mkcol cdir',
      'put up.txt cdir/up.txt',
      'get cdir/up.txt down.txt',
      'lock cdir/up.txt',
      'discover cdir/up.txt',
      'unlock cdir/up.txt',
      'propset cdir/up.txt color blue',
      'propget cdir/up.txt color',
      'cp cdir/up.txt cdir/copy.txt',
      'mv cdir/copy.txt cdir/moved.txt',
      'ls cdir',
      'rm cdir/moved.txt',
      'quit',
    ];
    // cadaver asks about the self-signed certificate on a terminal only: `script` gives it one.
    const feed = `(sleep 1; echo y; sleep 1; printf '%s\\n' ${commands.map((c) => `'${c}'`).join(' ')}; sleep 1)`;
    const r = await run('sh', ['-c', `${feed} | script -qec 'cadaver ${f.url}/' /dev/null`], {
      cwd: tmp,
      env: { HOME: home, TERM: 'dumb' },
    });
    const out = r.stdout;
    expect(out, out).to.include("Creating `cdir': succeeded");
    expect(out).to.match(/Uploading up\.txt[\s\S]*succeeded/);
    expect(readFileSync(path.join(tmp, 'down.txt'), 'utf8')).to.equal('hello from cadaver\n');
    expect(out).to.match(/Lock token <urn:uuid:/);
    expect(out).to.include("Unlocking `cdir/up.txt': succeeded");
    expect(out).to.include('Value of color is: blue');
    expect(out).to.match(/moved\.txt\s+19/);
    expect(out).to.include("Deleting `cdir/moved.txt': succeeded");
    expect(out).not.to.match(/failed/i);
  });

  it('serves an lftp session over https: open, cd, put, ls, mirror both ways, rm -r', async function () {
    this.timeout(60_000);
    const home = path.join(tmp, 'lftp-home');
    mkdirSync(home, { recursive: true });
    writeFileSync(path.join(tmp, 'up.txt'), 'hello from lftp\n');
    writeFileSync(path.join(tmp, 'two words.txt'), 'two\n');
    const [user, password] = ALICE;
    // lftp `cd`s with HEAD and lists with GET: a folder answered 405 ("cd: Operation not supported").
    const script = [
      'set cmd:fail-exit yes',
      'set net:max-retries 1',
      // lftp waits this long before it opens its next connection after a PUT or MKCOL (15 s by
      // default, against nginx too): a client setting, shortened so the test takes seconds.
      'set net:reconnect-interval-base 1',
      `set ssl:ca-file ${f.certFile}`,
      `open https://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${f.port}/`,
      'mkdir ldir',
      'cd ldir',
      'put up.txt',
      'mkdir sub',
      'cd sub',
      'put "two words.txt"',
      'cd /',
      'ls ldir/',
      'mirror ldir back',
      'mirror -R back again',
      'rm -r ldir',
    ].join('; ');
    const r = await run('lftp', ['-c', script], { cwd: tmp, env: { HOME: home } });
    expect(r.code, `${r.stdout}\n${r.stderr}`).to.equal(0);
    // The listing's sizes and times reach lftp (the page is laid out as nginx's autoindex).
    expect(r.stdout).to.match(/^-\S+\s+16\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+up\.txt$/m);
    expect(r.stdout).to.match(/^d\S+\s+-\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+sub$/m);
    expect(readFileSync(path.join(tmp, 'back', 'up.txt'), 'utf8')).to.equal('hello from lftp\n');
    expect(readFileSync(path.join(tmp, 'back', 'sub', 'two words.txt'), 'utf8')).to.equal('two\n');
    expect((await f.dav('GET', '/again/sub/two%20words.txt')).text).to.equal('two\n');
    expect((await f.dav('GET', '/again/up.txt')).text).to.equal('hello from lftp\n');
    expect((await f.dav('PROPFIND', '/ldir', { headers: { Depth: '0' } })).status).to.equal(404);
  });

  it('copies and checks names with #, %, ?, spaces and Unicode with rclone', async function () {
    this.timeout(60_000);
    const src = path.join(tmp, 'rclone-src');
    mkdirSync(path.join(src, 'sub dir #2'), { recursive: true });
    const names = [
      'a#b.txt',
      '100%.txt',
      'what?.txt',
      'with space.txt',
      'ünïcødé ß.txt',
      'sub dir #2/日本 #%?.txt',
    ];
    for (const n of names) writeFileSync(path.join(src, n), `content of ${n}\n`);
    const flags = await rcloneFlags(f);
    const copy = await run('rclone', ['copy', src, ':webdav:rclone', ...flags]);
    expect(copy.code, copy.stderr).to.equal(0);
    const check = await run('rclone', ['check', src, ':webdav:rclone', ...flags]);
    expect(check.code, check.stderr).to.equal(0);
    const moved = await run('rclone', [
      'moveto',
      ':webdav:rclone/a#b.txt',
      ':webdav:rclone/sub dir #2/c#d.txt',
      ...flags,
    ]);
    expect(moved.code, moved.stderr).to.equal(0);
    expect((await f.dav('GET', `/rclone/${encodeURIComponent('sub dir #2')}/c%23d.txt`)).text).to.equal(
      'content of a#b.txt\n',
    );
  });

  it('replays macOS Finder: OPTIONS, PROPFIND with quota and Apple props, LOCK, chunked PUT, PROPPATCH, UNLOCK, ._ files', async () => {
    const ua = ['-A', 'WebDAVFS/3.0.0 (03008000) Darwin/22.1.0 (arm64)'];
    expect(await status([...ua, '-X', 'OPTIONS', url('/')])).to.equal(200);
    const finderProps =
      '<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:prop>' +
      '<D:getlastmodified/><D:getcontentlength/><D:creationdate/><D:resourcetype/>' +
      '<D:quota-available-bytes/><D:quota-used-bytes/>' +
      '<A:executable xmlns:A="http://apache.org/dav/props/"/></D:prop></D:propfind>';
    const root = await body([
      ...ua,
      '-X',
      'PROPFIND',
      '-H',
      'Depth: 0',
      '-H',
      'Content-Type: text/xml',
      '--data-binary',
      finderProps,
      url('/'),
    ]);
    expect(root).to.match(/<D:quota-available-bytes>\d+</);
    expect(root).to.match(/<D:quota-used-bytes>\d+</);
    expect(root).to.match(/<executable xmlns="http:\/\/apache.org\/dav\/props\/"\/>[\s\S]*404/);
    await curl([...ua, '-X', 'MKCOL', url('/Finder')]);
    const listing = await body([
      ...ua,
      '-X',
      'PROPFIND',
      '-H',
      'Depth: 1',
      '--data-binary',
      finderProps,
      url('/Finder/'),
    ]);
    expect(hrefs(listing)).to.deep.equal(['/Finder/']);
    for (const name of ['report.pdf', '._report.pdf', '.DS_Store']) {
      const target = url(`/Finder/${encodeURIComponent(name)}`);
      // Finder: a lock-null LOCK, then a chunked PUT with X-Expected-Entity-Length and the token.
      const lock = await curl([
        ...ua,
        '-i',
        '-X',
        'LOCK',
        '-H',
        'Timeout: Second-600',
        '-H',
        'Depth: 0',
        '--data-binary',
        '<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner><D:href>http://www.apple.com/webdav_fs/</D:href></D:owner></D:lockinfo>',
        target,
      ]);
      expect(lock.stdout).to.match(/^HTTP\/1.1 201/);
      const token = /Lock-Token: <([^>]+)>/i.exec(lock.stdout)![1]!;
      const content = `bytes of ${name}\n`.repeat(1000);
      const put = await status(
        [
          ...ua,
          '-X',
          'PUT',
          '-H',
          'Transfer-Encoding: chunked',
          '-H',
          `X-Expected-Entity-Length: ${content.length}`,
          '-H',
          `If: <${target}> (<${token}>)`,
          '--data-binary',
          '@-',
          target,
        ],
        content,
      );
      expect(put, name).to.equal(204);
      const patch =
        '<?xml version="1.0" encoding="utf-8"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop>' +
        '<A:com.apple.FinderInfo xmlns:A="http://www.apple.com/webdav_fs/props/">AAAAAAAAAAAAAAAA</A:com.apple.FinderInfo>' +
        '</D:prop></D:set></D:propertyupdate>';
      const pp = await body([
        ...ua,
        '-X',
        'PROPPATCH',
        '-H',
        `If: (<${token}>)`,
        '--data-binary',
        patch,
        target,
      ]);
      expect(pp).to.include('HTTP/1.1 200 OK');
      expect(await status([...ua, '-X', 'UNLOCK', '-H', `Lock-Token: <${token}>`, target])).to.equal(204);
      expect(await body([target])).to.equal(content);
    }
    const after = await body([
      ...ua,
      '-X',
      'PROPFIND',
      '-H',
      'Depth: 1',
      '--data-binary',
      finderProps,
      url('/Finder/'),
    ]);
    expect(hrefs(after)).to.have.members([
      '/Finder/',
      '/Finder/report.pdf',
      '/Finder/._report.pdf',
      '/Finder/.DS_Store',
    ]);
  });

  it('replays Windows Explorer: unauthenticated OPTIONS /, PROPFIND allprop Depth 1, LOCK, PUT, PROPPATCH Win32, MOVE Overwrite F', async () => {
    const ua = ['-A', 'Microsoft-WebDAV-MiniRedir/10.0.19045'];
    const options = await run('curl', [
      '-sS',
      '-i',
      '--cacert',
      f.certFile,
      ...ua,
      '-X',
      'OPTIONS',
      url('/'),
    ]);
    expect(options.stdout).to.match(/^HTTP\/1.1 200/);
    expect(options.stdout).to.match(/^DAV: 1, 2/m);
    expect(options.stdout).to.match(/^MS-Author-Via: DAV/m);
    await curl([...ua, '-X', 'MKCOL', url('/Explorer')]);
    const allprop = await body([
      ...ua,
      '-X',
      'PROPFIND',
      '-H',
      'Depth: 1',
      '--data-binary',
      '<?xml version="1.0" encoding="utf-8" ?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>',
      url('/Explorer/'),
    ]);
    expect(allprop).to.include('<D:collection/>');
    const target = url('/Explorer/New Text Document.txt'.replace(/ /g, '%20'));
    const lock = await curl([
      ...ua,
      '-i',
      '-X',
      'LOCK',
      '-H',
      'Timeout: Second-3600',
      '--data-binary',
      '<?xml version="1.0" encoding="utf-8" ?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner><D:href>DESKTOP\\user</D:href></D:owner></D:lockinfo>',
      target,
    ]);
    const token = /Lock-Token: <([^>]+)>/i.exec(lock.stdout)![1]!;
    expect(
      await status([...ua, '-X', 'PUT', '-H', `If: (<${token}>)`, '--data-binary', 'hello windows', target]),
    ).to.equal(204);
    const win32 =
      '<?xml version="1.0" encoding="utf-8" ?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:schemas-microsoft-com:"><D:set><D:prop>' +
      '<Z:Win32CreationTime>Tue, 06 Jan 2026 10:00:00 GMT</Z:Win32CreationTime>' +
      '<Z:Win32LastAccessTime>Tue, 06 Jan 2026 10:00:00 GMT</Z:Win32LastAccessTime>' +
      '<Z:Win32LastModifiedTime>Mon, 05 Jan 2026 09:30:00 GMT</Z:Win32LastModifiedTime>' +
      '<Z:Win32FileAttributes>00000020</Z:Win32FileAttributes>' +
      '</D:prop></D:set></D:propertyupdate>';
    const pp = await body([
      ...ua,
      '-X',
      'PROPPATCH',
      '-H',
      `If: (<${token}>)`,
      '--data-binary',
      win32,
      target,
    ]);
    expect(pp).to.include('HTTP/1.1 200 OK');
    expect(pp).not.to.match(/40\d|424/);
    expect(await status([...ua, '-X', 'UNLOCK', '-H', `Lock-Token: <${token}>`, target])).to.equal(204);
    const props = await body([...ua, '-X', 'PROPFIND', '-H', 'Depth: 0', target]);
    expect(props).to.include('<D:getlastmodified>Mon, 05 Jan 2026 09:30:00 GMT</D:getlastmodified>');
    expect(props).to.include(
      '<Win32FileAttributes xmlns="urn:schemas-microsoft-com:">00000020</Win32FileAttributes>',
    );
    // Rename onto an existing name: Explorer sends Overwrite: F and must get 412.
    await curl([...ua, '-X', 'PUT', '--data-binary', 'other', url('/Explorer/other.txt')]);
    expect(
      await status([
        ...ua,
        '-X',
        'MOVE',
        '-H',
        `Destination: ${url('/Explorer/other.txt')}`,
        '-H',
        'Overwrite: F',
        target,
      ]),
    ).to.equal(412);
    expect(
      await status([
        ...ua,
        '-X',
        'MOVE',
        '-H',
        `Destination: ${url('/Explorer/renamed.txt')}`,
        '-H',
        'Overwrite: F',
        target,
      ]),
    ).to.equal(201);
    expect(await body([url('/Explorer/renamed.txt')])).to.equal('hello windows');
  });
});
