/**
 * SPEC "Limits", cursor pagination: per_page, X-Svc-Cursor-Next of the form `<page>:<opaque>`,
 * X-Svc-Cursor-Prev once a cursor was used, per_page fixed across pages, and cursors shared by
 * the JSON and XML forms of a list.
 */
import { expect } from 'chai';
import { startTestGateway, type Response, type TestGateway } from '../../helpers/gateway.ts';
import { API, asList, createUser, expectError, keyAuth, parseXml } from './client.ts';

describe('REST pagination', () => {
  let gw: TestGateway;
  let site: Record<string, string>;
  /** every user id, in list order (the bootstrap admin and the 25 made here) */
  let all: number[];

  before(async () => {
    gw = await startTestGateway();
    site = keyAuth(gw.siteKey);
    for (let i = 0; i < 25; i++) await createUser(gw);
    const r = await gw.request('GET', `${API}/users`, { headers: site });
    all = r.json.map((u: { id: number }) => u.id);
    expect(all).to.have.length(26);
  });
  after(async () => gw.stop());

  const page = (query: string) => gw.request('GET', `${API}/users?${query}`, { headers: site });
  const ids = (r: Response): number[] => r.json.map((u: { id: number }) => u.id);
  const next = (r: Response) => r.headers['x-svc-cursor-next'] as string | undefined;
  const prev = (r: Response) => r.headers['x-svc-cursor-prev'] as string | undefined;
  const cursorQuery = (cursor: string, perPage = 10) =>
    `per_page=${perPage}&cursor=${encodeURIComponent(cursor)}`;

  it('without per_page lists everyone on one page, without cursors', async () => {
    const r = await page('');
    expect(r.status).to.equal(200);
    expect(ids(r)).to.deep.equal(all);
    expect(next(r)).to.equal(undefined);
    expect(prev(r)).to.equal(undefined);
  });

  it('per_page=10 gives 10 items and X-Svc-Cursor-Next of the form <page>:<opaque>', async () => {
    const r = await page('per_page=10');
    expect(r.status, r.text).to.equal(200);
    expect(ids(r)).to.deep.equal(all.slice(0, 10));
    const cursor = next(r)!;
    expect(cursor).to.be.a('string');
    expect(cursor).to.match(/^2:[^:\s]+$/);
    // Opaque: it does not spell out the offset or the list.
    expect(cursor.split(':')[1]).to.not.match(/^\d+$/);
    expect(cursor).to.not.include('users');
    expect(prev(r)).to.equal(undefined);
  });

  it('following the cursors yields every user exactly once, in order; the last page has no Next', async () => {
    const seen: number[] = [];
    const pageNumbers: string[] = [];
    let r = await page('per_page=10');
    seen.push(...ids(r));
    let pages = 1;
    while (next(r)) {
      pageNumbers.push(next(r)!.split(':')[0]!);
      r = await page(cursorQuery(next(r)!));
      expect(r.status, r.text).to.equal(200);
      seen.push(...ids(r));
      pages += 1;
      expect(pages).to.be.below(10);
    }
    expect(pages).to.equal(3);
    expect(pageNumbers).to.deep.equal(['2', '3']);
    expect(ids(r)).to.have.length(6);
    expect(next(r)).to.equal(undefined);
    expect(seen).to.deep.equal(all);
    expect(new Set(seen).size).to.equal(seen.length);
  });

  it('an exact multiple of per_page ends without an empty page', async () => {
    const first = await page('per_page=13');
    const second = await page(cursorQuery(next(first)!, 13));
    expect(ids(second)).to.deep.equal(all.slice(13));
    expect(next(second)).to.equal(undefined);
  });

  it('pages fetched with a cursor carry X-Svc-Cursor-Prev, which leads back to the previous page', async () => {
    const p1 = await page('per_page=10');
    const p2 = await page(cursorQuery(next(p1)!));
    const p3 = await page(cursorQuery(next(p2)!));
    expect(prev(p2)).to.match(/^1:[^:\s]+$/);
    expect(prev(p3)).to.match(/^2:[^:\s]+$/);

    const back2 = await page(cursorQuery(prev(p3)!));
    expect(back2.status, back2.text).to.equal(200);
    expect(ids(back2)).to.deep.equal(ids(p2));
    expect(next(back2)).to.be.a('string');
    const back1 = await page(cursorQuery(prev(back2)!));
    expect(ids(back1)).to.deep.equal(ids(p1));
    expect(prev(back1)).to.equal(undefined);
    // And forward again from a page reached backwards.
    const again3 = await page(cursorQuery(next(back2)!));
    expect(ids(again3)).to.deep.equal(ids(p3));
  });

  it('a cursor carries per_page: omitting per_page keeps it, changing it is 400 invalid-cursor', async () => {
    const p1 = await page('per_page=10');
    const cursor = next(p1)!;
    const kept = await page(`cursor=${encodeURIComponent(cursor)}`);
    expect(kept.status, kept.text).to.equal(200);
    expect(ids(kept)).to.deep.equal(all.slice(10, 20));
    for (const perPage of [5, 11, 1000]) {
      expectError(await page(cursorQuery(cursor, perPage)), 400, 'bad-request/invalid-cursor');
    }
  });

  it('the same cursor works on the XML form', async () => {
    const p1 = await page('per_page=10');
    const x = await gw.request('GET', `${API}/users.xml?${cursorQuery(next(p1)!)}`, { headers: site });
    expect(x.status, x.text).to.equal(200);
    expect(x.headers['content-type']).to.match(/^application\/xml/);
    const users = asList(parseXml(x.text).users.user) as { id: { '#text': string } }[];
    expect(users.map((u) => Number(u.id['#text']))).to.deep.equal(all.slice(10, 20));
    // XML pages carry the cursor headers too, and they work on the JSON form.
    expect(next(x)).to.match(/^3:/);
    expect(prev(x)).to.match(/^1:/);
    const j3 = await page(cursorQuery(next(x)!));
    expect(ids(j3)).to.deep.equal(all.slice(20));
    const viaAccept = await gw.request('GET', `${API}/users?${cursorQuery(next(p1)!)}`, {
      headers: { ...site, Accept: 'application/xml' },
    });
    expect(viaAccept.status).to.equal(200);
    expect(viaAccept.text).to.include(`<id type="integer">${all[10]}</id>`);
  });

  it('a cursor made for one caller works for another caller of the same list', async () => {
    const admin = await gw.request('POST', `${API}/sessions`, {
      body: { username: 'admin', password: 'admin-password' },
    });
    const p1 = await page('per_page=10');
    const r = await gw.request('GET', `${API}/users?${cursorQuery(next(p1)!)}`, {
      headers: { 'X-SvcAPI-Auth': admin.json.id },
    });
    expect(r.status, r.text).to.equal(200);
    expect(ids(r)).to.deep.equal(all.slice(10, 20));
  });
});
