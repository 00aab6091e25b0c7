/**
 * The PROXY header parser and the X-Forwarded-For walk of protocols/shared/proxy.ts, on the
 * examples and limits of haproxy's proxy-protocol.txt; the listeners are driven by real clients in
 * test/protocols/proxy.test.ts.
 */
import type { IncomingMessage } from 'node:http';
import type net from 'node:net';
import { expect } from 'chai';
import {
  forwardedClientAddress,
  parseProxyHeader,
  ProxyHeaderError,
} from '../../../protocols/shared/proxy.ts';
import { proxyHeaderV1, proxyHeaderV2 } from '../../helpers/proxy-relay.ts';

const endpoints = {
  source: '203.0.113.7',
  sourcePort: 56324,
  destination: '192.0.2.10',
  destinationPort: 443,
};
const text = (s: string) => Buffer.from(s, 'latin1');

describe('PROXY protocol header parser', () => {
  it('reads v1 TCP4 and TCP6 headers and leaves what follows', () => {
    const data = Buffer.concat([proxyHeaderV1(endpoints), text('SSH-2.0-OpenSSH\r\n')]);
    const header = parseProxyHeader(data);
    expect(header).to.deep.equal({ length: proxyHeaderV1(endpoints).length, source: '203.0.113.7' });
    const v6 = parseProxyHeader(text('PROXY TCP6 2001:db8::7 2001:db8::1 4000 22\r\n'));
    expect(v6).to.deep.include({ source: '2001:db8::7' });
    // An IPv4-mapped client is the IPv4 client, as every record names it.
    expect(parseProxyHeader(text('PROXY TCP6 ::ffff:203.0.113.7 ::1 4000 22\r\n'))).to.deep.include({
      source: '203.0.113.7',
    });
  });

  it('takes v1 UNKNOWN as the connection’s own, whatever follows it', () => {
    expect(parseProxyHeader(text('PROXY UNKNOWN\r\n'))).to.deep.equal({ length: 15, source: null });
    expect(parseProxyHeader(text('PROXY UNKNOWN ffff::1 ffff::2 1 2\r\nX'))).to.deep.include({
      source: null,
    });
  });

  it('waits for more of a header, and tells bytes that are none', () => {
    for (const part of ['', 'P', 'PROXY', 'PROXY TCP4 203.0.113.7 192.0.2.10 5'])
      expect(parseProxyHeader(text(part))).to.equal('incomplete');
    expect(parseProxyHeader(proxyHeaderV2(endpoints).subarray(0, 20))).to.equal('incomplete');
    expect(parseProxyHeader(proxyHeaderV2(endpoints).subarray(0, 5))).to.equal('incomplete');
    for (const other of ['\x16\x03\x01\x02\x00', 'SSH-2.0-x\r\n', 'USER a\r\n', 'PROXZ'])
      expect(parseProxyHeader(text(other))).to.equal('none');
  });

  it('refuses malformed v1 headers', () => {
    for (const bad of [
      'PROXY TCP4 203.0.113.999 192.0.2.10 1 2\r\n',
      'PROXY TCP4 010.0.0.1 192.0.2.10 1 2\r\n',
      'PROXY TCP4 2001:db8::7 192.0.2.10 1 2\r\n',
      'PROXY TCP6 203.0.113.7 2001:db8::1 1 2\r\n',
      'PROXY TCP4 203.0.113.7 192.0.2.10 65536 2\r\n',
      'PROXY TCP4 203.0.113.7 192.0.2.10 01 2\r\n',
      'PROXY TCP4 203.0.113.7  192.0.2.10 1 2\r\n',
      'PROXY UDP4 203.0.113.7 192.0.2.10 1 2\r\n',
      'PROXY TCP4 203.0.113.7 192.0.2.10 1\r\n',
      `PROXY UNKNOWN ${'x'.repeat(100)}`,
    ])
      expect(() => parseProxyHeader(text(bad)), bad).to.throw(ProxyHeaderError);
  });

  it('reads v2 PROXY over IPv4 and IPv6, with TLVs, and LOCAL as the connection’s own', () => {
    const v4 = proxyHeaderV2(endpoints);
    expect(parseProxyHeader(Buffer.concat([v4, text('rest')]))).to.deep.equal({
      length: v4.length,
      source: '203.0.113.7',
    });
    const v6 = parseProxyHeader(proxyHeaderV2({ ...endpoints, source: '2001:db8::7', destination: '::1' }));
    expect(v6).to.deep.include({ source: '2001:db8::7' });
    expect(parseProxyHeader(proxyHeaderV2('local'))).to.deep.equal({ length: 16, source: null });
  });

  it('takes v2 UNSPEC and UNIX as the connection’s own, and refuses other versions and commands', () => {
    const v4 = proxyHeaderV2(endpoints);
    for (const familyProtocol of [0x00, 0x31]) {
      const own = Buffer.from(v4);
      own[13] = familyProtocol;
      expect(parseProxyHeader(own)).to.deep.include({ source: null });
    }
    for (const [offset, value] of [
      [12, 0x11], // version 1 in the binary form
      [12, 0x22], // command 2
    ] as const) {
      const bad = Buffer.from(v4);
      bad[offset] = value;
      expect(() => parseProxyHeader(bad)).to.throw(ProxyHeaderError);
    }
    const short = Buffer.from(v4.subarray(0, 16 + 8));
    short.writeUInt16BE(8, 14);
    expect(() => parseProxyHeader(short)).to.throw(ProxyHeaderError);
  });
});

describe('X-Forwarded-For from trusted proxies', () => {
  const request = (peer: string, xff?: string) =>
    ({
      socket: { remoteAddress: peer } as net.Socket,
      headers: xff === undefined ? {} : { 'x-forwarded-for': xff },
    }) as IncomingMessage;
  const trusted = ['10.0.0.0/8', '192.0.2.1'];

  it('takes the rightmost address that is not a trusted proxy', () => {
    expect(forwardedClientAddress(request('10.1.2.3', '198.51.100.1, 203.0.113.7'), trusted)).to.equal(
      '203.0.113.7',
    );
    // Two trusted hops (a CDN, then the balancer) are walked through.
    expect(forwardedClientAddress(request('10.1.2.3', '203.0.113.7, 192.0.2.1'), trusted)).to.equal(
      '203.0.113.7',
    );
    expect(forwardedClientAddress(request('::ffff:10.1.2.3', '::ffff:203.0.113.7'), trusted)).to.equal(
      '203.0.113.7',
    );
  });

  it('believes nothing from an untrusted peer, and stops at an entry that is no address', () => {
    expect(forwardedClientAddress(request('198.51.100.9', '203.0.113.7'), trusted)).to.equal('198.51.100.9');
    expect(forwardedClientAddress(request('10.1.2.3', '203.0.113.7, unknown'), trusted)).to.equal('10.1.2.3');
    expect(forwardedClientAddress(request('10.1.2.3'), trusted)).to.equal('10.1.2.3');
    expect(forwardedClientAddress(request('10.1.2.3', '203.0.113.7'), [])).to.equal('10.1.2.3');
    // Only trusted hops: the leftmost is as far as anyone vouches.
    expect(forwardedClientAddress(request('10.1.2.3', '10.9.9.9'), trusted)).to.equal('10.9.9.9');
  });
});
