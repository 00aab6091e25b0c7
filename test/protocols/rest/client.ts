/**
 * Small helpers shared by the REST API tests: credentials headers, fixtures made over the wire
 * with the site-wide key, SPEC's error object assertion and an XML reader. Fixtures go through
 * the API (or the core), never raw rows (STYLE.md §5).
 */
import { expect } from 'chai';
import { XMLParser } from 'fast-xml-parser';
import type { Response, TestGateway } from '../../helpers/gateway.ts';

/** API is where SPEC's versioned API lives. */
export const API = '/api/rest/v1';

let counter = 0;
/** unique makes a name no other test in this run uses (usernames are unique per site). */
export function unique(prefix: string): string {
  counter += 1;
  return `${prefix}${counter}${Math.random().toString(36).slice(2, 6)}`;
}

/** keyAuth is the X-SvcAPI-Key header. */
export function keyAuth(key: string): Record<string, string> {
  return { 'X-SvcAPI-Key': key };
}

/** sessionAuth is the X-SvcAPI-Auth header. */
export function sessionAuth(id: string): Record<string, string> {
  return { 'X-SvcAPI-Auth': id };
}

/** basicAuth is HTTP Basic with `user` as username and `password` as password. */
export function basicAuth(user: string, password = 'x'): Record<string, string> {
  return { Authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` };
}

/** createUser makes a user with the site-wide key and returns the User the API answered with. */
export async function createUser(
  gw: TestGateway,
  fields: Record<string, unknown> = {},
): Promise<{ id: number; username: string; password: string } & Record<string, unknown>> {
  const password = (fields.password as string | undefined) ?? 'user-password-1';
  const body = { username: unique('user'), password, ...fields };
  const r = await gw.request('POST', `${API}/users`, { headers: keyAuth(gw.siteKey), body });
  expect(r.status, r.text).to.equal(201);
  return { ...r.json, password };
}

/** createKey makes an API key for a user with the site-wide key and returns the key text and record. */
export async function createKey(
  gw: TestGateway,
  userId: number,
  fields: Record<string, unknown> = {},
): Promise<{ key: string; id: number } & Record<string, unknown>> {
  const r = await gw.request('POST', `${API}/api_keys`, {
    headers: keyAuth(gw.siteKey),
    body: { user_id: userId, ...fields },
  });
  expect(r.status, r.text).to.equal(201);
  return r.json;
}

/** login opens a session (POST /sessions) and returns its id; it fails the test on any other answer. */
export async function login(
  gw: TestGateway,
  username: string,
  password: string,
  localAddress?: string,
): Promise<string> {
  const r = await gw.request('POST', `${API}/sessions`, {
    body: { username, password },
    ...(localAddress ? { localAddress } : {}),
  });
  expect(r.status, r.text).to.equal(200);
  expect(r.json.id).to.be.a('string');
  return r.json.id as string;
}

/** SPEC_ERROR_FIELDS are the fields every SPEC error object has. */
export const SPEC_ERROR_FIELDS = ['error', 'http-code', 'instance', 'title', 'type'];

/** expectNoLeak asserts a body carries no stack trace or source location. */
export function expectNoLeak(r: Response): void {
  expect(r.text).to.not.match(/\n\s+at\s/);
  expect(r.text).to.not.match(/\.(ts|js|cjs|mjs):\d+/);
  expect(r.text).to.not.match(/node_modules|stack/i);
}

/** expectError asserts SPEC's JSON error object with the given status and type. */
export function expectError(r: Response, status: number, type: string): void {
  expect(r.status, r.text).to.equal(status);
  expect(r.headers['content-type']).to.match(/^application\/json/);
  expect(r.json, r.text).to.be.an('object');
  expect(r.json).to.include.all.keys(...SPEC_ERROR_FIELDS);
  expect(r.json.type).to.equal(type);
  expect(r.json['http-code']).to.equal(status);
  expect(r.json.error).to.be.a('string').and.not.equal('');
  expect(r.json.title).to.be.a('string').and.not.equal('');
  expect(r.json.instance).to.be.a('string').and.not.equal('');
  expectNoLeak(r);
}

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  textNodeName: '#text',
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: false,
});

/** XmlDoc is a parsed XML body: elements by name, attributes as `@_name`, text as `#text`. */
export type XmlDoc = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** parseXml reads an XML body (keeping attributes as `@_name` and text as strings). */
export function parseXml(text: string): XmlDoc {
  return parser.parse(text) as XmlDoc;
}

/** asList turns one parsed XML child, or several, into a list. */
export function asList<T>(v: T | T[] | undefined): T[] {
  if (v === undefined) return [];
  return Array.isArray(v) ? v : [v];
}
