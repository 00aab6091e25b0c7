/**
 * WebDAV's dates and ETags are formatted by hand (protocols/webdav/http.ts, issue 13: a listing
 * writes two dates and an ETag per entry); the built-in formatting they replace is the oracle, over
 * random times across Date's whole range, the edges of the years written by hand, and leap days.
 */
import { expect } from 'chai';
import { etagOf, httpDate, isoDate } from '../../../protocols/webdav/http.ts';
import type { Entry } from '../../../src/core/index.ts';

/** builtinIso is what isoDate wrote before: toISOString without its milliseconds. */
const builtinIso = (d: Date) => {
  const iso = d.toISOString();
  return iso.length === 24 ? `${iso.slice(0, 19)}Z` : iso.replace(/\.\d{3}Z$/, 'Z');
};

const MAX_TIME_MS = 8.64e15;
const times = [
  0,
  -1,
  1,
  Date.UTC(1000, 0, 1) - 1,
  Date.UTC(1000, 0, 1),
  Date.UTC(9999, 11, 31, 23, 59, 59, 999),
  Date.UTC(10000, 0, 1),
  Date.UTC(2000, 1, 29, 12),
  Date.UTC(2100, 1, 28, 23, 59, 59),
  Date.UTC(2100, 2, 1),
  Date.UTC(1600, 1, 29),
  Date.UTC(1969, 11, 31, 23, 59, 59, 500),
  MAX_TIME_MS,
  -MAX_TIME_MS,
];

describe('WebDAV dates and ETags formatted by hand', () => {
  before(() => {
    // Random times: a third over Date's whole range, the rest within about ±2,700 years of 1970.
    for (let i = 0; i < 200_000; i++)
      times.push(Math.floor((Math.random() * 2 - 1) * MAX_TIME_MS * (i % 3 === 0 ? 1 : 1e-2)));
  });

  it('getlastmodified and Last-Modified are what toUTCString writes, creationdate what toISOString does', () => {
    for (const t of times) {
      const d = new Date(t);
      expect(httpDate(d), String(t)).to.equal(d.toUTCString());
      expect(isoDate(d), String(t)).to.equal(builtinIso(d));
    }
  });

  it('an ETag writes size and time in base 36 as toString(36) does, signs and zero included', () => {
    const entry = (size: number, t: number, md5: string | null = 'abc'): Entry =>
      ({ path: 'f', type: 'file', size, mtime: new Date(t), md5 }) as Entry;
    for (const t of times.slice(0, 20_000)) {
      const size = Math.abs(t) % 1e12;
      expect(etagOf(entry(size, t)), String(t)).to.equal(`"abc-${size.toString(36)}-${t.toString(36)}"`);
    }
    expect(etagOf(entry(0, 0, null))).to.equal('"x-0-0"');
    expect(etagOf(entry(35, 36))).to.equal('"abc-z-10"');
  });
});
