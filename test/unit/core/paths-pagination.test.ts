import { expect } from 'chai';
import { GatewayError } from '../../../src/core/errors.ts';
import { Paginator } from '../../../src/core/pagination.ts';
import { ancestorsOf, normalizeFolderPath } from '../../../src/core/paths.ts';

describe('folder paths', () => {
  const cases: [string, string | null][] = [
    ['', ''],
    ['/', ''],
    ['a', 'a'],
    ['/a/b/', 'a/b'],
    ['Ünï cødé/b c', 'Ünï cødé/b c'],
    ['a//b', null],
    ['a/../b', null],
    ['./a', null],
    ['a/\u0000b', null],
    ['a/\tb', null],
  ];
  for (const [input, expected] of cases) {
    it(`${JSON.stringify(input)} → ${expected === null ? 'refused' : JSON.stringify(expected)}`, () => {
      const r = normalizeFolderPath(input, 5000);
      if (expected === null) expect(r).to.have.property('problem');
      else expect(r).to.deep.equal({ path: expected });
    });
  }
  it('refuses paths over the limit', () => {
    expect(normalizeFolderPath('a'.repeat(11), 10)).to.have.property('problem');
    expect(normalizeFolderPath('a'.repeat(10), 10)).to.deep.equal({ path: 'a'.repeat(10) });
  });
  it('lists the root, each ancestor and the path', () => {
    expect(ancestorsOf('a/b/c')).to.deep.equal(['', 'a', 'a/b', 'a/b/c']);
    expect(ancestorsOf('')).to.deep.equal(['']);
  });
});

describe('cursor pagination', () => {
  const p = new Paginator('secret-one');
  const rows = (n: number) => Array.from({ length: n }, (_, i) => i);
  const typeOf = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return (err as GatewayError).type;
    }
    return 'no error';
  };

  it('gives a next cursor of the form <page>:<opaque> only when another page exists', () => {
    const w = p.window('users', { per_page: 10 });
    const page = p.page(w, rows(11));
    expect(page.items).to.have.length(10);
    expect(page.next).to.match(/^2:[A-Za-z0-9_-]+$/);
    expect(page.prev).to.equal(null);
    expect(p.page(w, rows(10)).next).to.equal(null);
  });

  it('walks forward and back', () => {
    const first = p.page(p.window('users', { per_page: 10 }), rows(11));
    const w2 = p.window('users', { cursor: first.next!, per_page: 10 });
    expect(w2).to.include({ page: 2, offset: 10, perPage: 10 });
    const second = p.page(w2, rows(11));
    const w3 = p.window('users', { cursor: second.next! });
    expect(w3).to.include({ page: 3, offset: 20, perPage: 10 });
    const back = p.window('users', { cursor: p.page(w3, rows(3)).prev! });
    expect(back).to.include({ page: 2, offset: 10 });
  });

  it('refuses forged, foreign, tampered and mismatched cursors', () => {
    const next = p.page(p.window('users', { per_page: 10 }), rows(11)).next!;
    expect(typeOf(() => p.window('users', { cursor: 'garbage' }))).to.equal('bad-request/invalid-cursor');
    expect(typeOf(() => p.window('groups', { cursor: next }))).to.equal('bad-request/invalid-cursor');
    expect(typeOf(() => new Paginator('other-secret').window('users', { cursor: next }))).to.equal(
      'bad-request/invalid-cursor',
    );
    const tampered = next.slice(0, -2) + (next.endsWith('AA') ? 'BB' : 'AA');
    expect(typeOf(() => p.window('users', { cursor: tampered }))).to.equal('bad-request/invalid-cursor');
    expect(typeOf(() => p.window('users', { cursor: next, per_page: 20 }))).to.equal(
      'bad-request/invalid-cursor',
    );
  });

  it('bounds per_page', () => {
    expect(typeOf(() => p.window('users', { per_page: 0 }))).to.equal('bad-request/request-params-invalid');
    expect(typeOf(() => p.window('users', { per_page: '10001' }))).to.equal(
      'bad-request/request-params-invalid',
    );
    expect(typeOf(() => p.window('users', { per_page: 'ten' }))).to.equal(
      'bad-request/request-params-invalid',
    );
    expect(p.window('users', {}).perPage).to.equal(1000);
    expect(p.window('users', { per_page: '10000' }).perPage).to.equal(10000);
  });
});

describe('client addresses', () => {
  it('records IPv4-mapped IPv6 clients as IPv4 and IPv6 in its short form', async () => {
    const { clientIp } = await import('../../../src/core/access/allowed-ips.ts');
    expect(clientIp('::ffff:10.1.2.3')).to.equal('10.1.2.3');
    expect(clientIp('2001:0db8:0:0:0:0:0:7')).to.equal('2001:db8::7');
    expect(clientIp('127.0.0.1')).to.equal('127.0.0.1');
  });
});
