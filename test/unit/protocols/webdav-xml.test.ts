/**
 * WebDAV responses are written as text (protocols/webdav/xml.ts build, issue 13); fast-xml-parser's
 * builder, which wrote them before, is the oracle: the same ordered nodes give the same text, for
 * PROPFIND's live properties and for dead properties with namespaces, attributes and characters
 * that need escaping, parsed back from stored content.
 */
import { expect } from 'chai';
import { XMLBuilder } from 'fast-xml-parser';
import { build, contentNodes, dav, node, qualified, text, type Node } from '../../../protocols/webdav/xml.ts';

const oracle = new XMLBuilder({
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  suppressEmptyNode: true,
  suppressBooleanAttributes: false,
  format: false,
});

const same = (nodes: Node[]) => expect(build(nodes)).to.equal(oracle.build(nodes) as string);

describe('WebDAV XML written as text', () => {
  it('a PROPFIND response of live properties, as the library writes it', () => {
    same([
      dav('response', [
        dav('href', [text('/a%20b/c&d.txt')]),
        dav('propstat', [
          dav('prop', [
            dav('resourcetype'),
            dav('getcontentlength', [text('4096')]),
            dav('getlastmodified', [text('Thu, 26 Nov 2026 09:00:00 GMT')]),
            dav('getetag', [text('"abc123"')]),
            dav('displayname', [text(`Tom & Jerry's <draft> "v2"`)]),
          ]),
          dav('status', [text('HTTP/1.1 200 OK')]),
        ]),
        dav('propstat', [
          dav('prop', [qualified('urn:x', 'missing')]),
          dav('status', [text('HTTP/1.1 404 Not Found')]),
        ]),
      ]),
    ]);
  });

  it('dead properties read back from stored content, with namespaces, attributes and entities', () => {
    const stored = [
      '',
      'plain',
      '<x:author xmlns:x="urn:a" role="lead &amp; co">Ann &lt;ann@example.com&gt;</x:author>',
      '<a xmlns="urn:b"><b/><c d="1">t</c> tail &amp; more</a>',
      'é ü 漢字 &quot;quoted&quot; &apos;single&apos;',
    ];
    for (const content of stored)
      same([
        node('p', contentNodes(content), { xmlns: 'urn:p' }),
        qualified('DAV:', 'q', contentNodes(content)),
      ]);
  });

  it('a multistatus root with its namespace declaration', () => {
    same([{ 'D:multistatus': [dav('response', [dav('href', [text('/')])])], ':@': { '@_xmlns:D': 'DAV:' } }]);
  });
});
