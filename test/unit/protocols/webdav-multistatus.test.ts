/**
 * A folder's PROPFIND writes its plain allprop responses as bytes (protocols/webdav/multistatus.ts,
 * issue 13). The oracle is the text those responses had when they were built as strings, from the
 * string formatters (themselves checked against Date's own in webdav-dates.test.ts), over random
 * entries: names in several scripts and with XML's special characters, sizes, missing checksums,
 * folders, and times across Date's whole range.
 */
import { expect } from 'chai';
import { etagOf, hrefOf, httpDate, isoDate } from '../../../protocols/webdav/http.ts';
import { Multistatus } from '../../../protocols/webdav/multistatus.ts';
import {
  contentTypeOf,
  liveProperty,
  response,
  writeResponse,
  type PropRequest,
} from '../../../protocols/webdav/props.ts';
import { build, DAV, escapeXml, qualified } from '../../../protocols/webdav/xml.ts';
import type { Entry } from '../../../src/core/index.ts';

const MAX_TIME_MS = 8.64e15;
const ALLPROP: PropRequest = { kind: 'allprop', include: [] };
const NAMES = ['a.txt', "l'été & <co>.PDF", 'данные.json', '文件 1.png', 'x"y.mp3', 'no-extension', '😀.zip'];

/** expected is a plain allprop response as it was built from strings. */
function expected(e: Entry, href: string): string {
  const mtime = `<D:getlastmodified>${httpDate(e.mtime)}</D:getlastmodified><D:creationdate>${isoDate(e.mtime)}</D:creationdate>`;
  const found =
    e.type === 'file'
      ? `<D:resourcetype/><D:getcontentlength>${e.size ?? 0}</D:getcontentlength>${mtime}<D:getetag>${escapeXml(etagOf(e)!)}</D:getetag><D:getcontenttype>${contentTypeOf(e.path)}</D:getcontenttype>`
      : `<D:resourcetype><D:collection/></D:resourcetype>${mtime}`;
  return (
    `<D:response><D:href>${escapeXml(href)}</D:href><D:propstat><D:prop>${found}</D:prop>` +
    '<D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>'
  );
}

function randomEntry(i: number): Entry {
  const wide = i % 3 === 0;
  const t = Math.floor((Math.random() * 2 - 1) * MAX_TIME_MS * (wide ? 1 : 1e-2));
  const folder = i % 5 === 0;
  const name = `${NAMES[i % NAMES.length]}${i}`;
  return {
    path: `docs/sub/${name}`,
    type: folder ? 'directory' : 'file',
    size: folder ? null : i % 7 === 0 ? 0 : Math.floor(Math.random() * 2 ** (i % 53)),
    mtime: new Date(t),
    md5: folder || i % 11 === 0 ? null : (i * 2654435761).toString(16).padStart(32, '0').slice(-32),
    crc32: null,
  } as Entry;
}

describe('WebDAV multistatus written as bytes', () => {
  it('writes whole numbers in base 10 and 36 as toString does, signs, zero and unsafe integers included', () => {
    const numbers = [0, 1, -1, 9, 10, 35, 36, 2 ** 53 - 1, -(2 ** 53) + 1, 2 ** 60, 1e21, -MAX_TIME_MS];
    for (let i = 0; i < 20_000; i++) numbers.push(Math.floor((Math.random() * 2 - 1) * 2 ** (i % 54)));
    for (const n of numbers)
      for (const radix of [10, 36]) {
        const w = new Multistatus(64);
        w.int(n, radix);
        expect(w.toString(), `${n} in base ${radix}`).to.equal(n.toString(radix));
      }
  });

  it('writes getlastmodified and creationdate as httpDate and isoDate do, over Date’s whole range', () => {
    const times = [
      0,
      -1,
      Date.UTC(1000, 0, 1) - 1,
      Date.UTC(9999, 11, 31, 23, 59, 59),
      MAX_TIME_MS,
      -MAX_TIME_MS,
    ];
    for (let i = 0; i < 50_000; i++)
      times.push(Math.floor((Math.random() * 2 - 1) * MAX_TIME_MS * (i % 3 === 0 ? 1 : 1e-2)));
    for (const t of times) {
      const d = new Date(t);
      const w = new Multistatus(64);
      w.room(64);
      w.httpDate(d);
      w.ascii('|');
      w.isoDate(d);
      expect(w.toString(), String(t)).to.equal(`${httpDate(d)}|${isoDate(d)}`);
    }
  });

  it('writes each plain allprop response as the string response does, across pieces', () => {
    const entries = Array.from({ length: 5_000 }, (_, i) => randomEntry(i));
    const prefix = hrefOf('docs/sub', true);
    const href = (e: Entry) =>
      `${prefix}${encodeURIComponent(e.path.slice(e.path.lastIndexOf('/') + 1))}${e.type === 'directory' ? '/' : ''}`;
    // Small pieces, so that many responses start in one piece and end in the next.
    const w = new Multistatus(1024);
    const pieces: Buffer[] = [];
    for (const entry of entries) {
      writeResponse(w, { entry, dead: [], locks: [], href: href(entry) }, ALLPROP);
      pieces.push(...w.take());
    }
    pieces.push(...w.end());
    expect(pieces.length).to.be.greaterThan(100);
    expect(Buffer.concat(pieces).toString('utf8')).to.equal(
      entries.map((e) => expected(e, href(e))).join(''),
    );
    // response(), for a resource on its own (Depth 0), is the same text, its href made from the path.
    for (const entry of entries.slice(0, 500))
      expect(response({ entry, dead: [], locks: [] }, ALLPROP)).to.equal(
        expected(entry, hrefOf(entry.path, entry.type === 'directory')),
      );
  });

  it('writes the live properties a prop request names as the XML nodes do, a folder’s missing ones under 404', () => {
    const asks = [
      ['displayname', 'getlastmodified', 'getcontentlength', 'resourcetype'], // rclone's
      [
        'getetag',
        'getcontenttype',
        'getetag',
        'creationdate',
        'displayname',
        'resourcetype',
        'getcontentlength',
      ],
      ['getcontentlength'],
      ['getetag', 'getcontenttype'],
    ];
    const entries = Array.from({ length: 2_000 }, (_, i) => randomEntry(i));
    for (const names of asks) {
      const req: PropRequest = { kind: 'prop', props: names.map((name) => ({ ns: DAV, name })) };
      const w = new Multistatus(512);
      let want = '';
      for (const entry of entries) {
        const href = hrefOf(entry.path, entry.type === 'directory');
        const r = { entry, dead: [], locks: [], href };
        writeResponse(w, r, req);
        const unique = [...new Set(names)];
        const found = unique.flatMap((n) => {
          const node = liveProperty(n, r);
          return node ? [build([node])] : [];
        });
        const missing = unique.filter((n) => !liveProperty(n, r)).map((n) => build([qualified(DAV, n)]));
        want +=
          `<D:response><D:href>${escapeXml(href)}</D:href>` +
          (found.length
            ? `<D:propstat><D:prop>${found.join('')}</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>`
            : '') +
          (missing.length
            ? `<D:propstat><D:prop>${missing.join('')}</D:prop><D:status>HTTP/1.1 404 Not Found</D:status></D:propstat>`
            : '') +
          '</D:response>';
      }
      expect(w.toString(), names.join(' ')).to.equal(want);
    }
  });

  it('writes a response with dead properties or a lock as text, unchanged', () => {
    const entry = randomEntry(1);
    const r = {
      entry,
      dead: [{ namespace: 'urn:x', name: 'color', value: 'red' }],
      locks: [],
      href: '/f',
    } as Parameters<typeof response>[0];
    const w = new Multistatus();
    writeResponse(w, r, ALLPROP);
    const text = w.toString();
    expect(text).to.equal(response(r, ALLPROP));
    expect(text).to.contain('>red<');
  });
});
