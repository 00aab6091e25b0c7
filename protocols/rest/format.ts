/**
 * Request and response formats (SPEC "Request and response formats"): JSON or XML responses by
 * path extension or Accept, request bodies in JSON, XML or form encoding by Content-Type, and
 * SPEC's XML typing (type attributes, nil="true", empty lists as <nil-classes type="array"/>).
 * XML is read and written with fast-xml-parser, never by hand.
 */
import type { IncomingMessage } from 'node:http';
import { XMLBuilder, XMLParser, XMLValidator } from 'fast-xml-parser';
import qs from 'qs';
import getRawBody from 'raw-body';
import { GatewayError } from '../../src/core/index.ts';

/** Format is a response format. */
export type Format = 'json' | 'xml';

const builder = new XMLBuilder({
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  textNodeName: '#text',
  suppressEmptyNode: true,
  // fast-xml-parser writes an attribute valued "true" as a bare name (`<x nil/>`) by default, which
  // is not well-formed XML; SPEC's null is `nil="true"`.
  suppressBooleanAttributes: false,
  format: false,
});

type XmlNode = Record<string, unknown>;

// Plural resource names for list roots; the element of each item is the singular.
function singular(root: string): string {
  if (root.endsWith('ies')) return `${root.slice(0, -3)}y`;
  return root.endsWith('s') ? root.slice(0, -1) : root;
}

function xmlValue(value: unknown, name: string): XmlNode | string {
  if (value === null || value === undefined) return { '@_nil': 'true' };
  if (value instanceof Date) return { '@_type': 'datetime', '#text': value.toISOString() };
  if (typeof value === 'boolean') return { '@_type': 'boolean', '#text': String(value) };
  if (typeof value === 'number')
    return { '@_type': Number.isInteger(value) ? 'integer' : 'float', '#text': String(value) };
  if (Array.isArray(value)) {
    if (value.length === 0) return { '@_type': 'array' };
    const item = singular(name);
    return { '@_type': 'array', [item]: value.map((v) => xmlValue(v, item)) };
  }
  if (typeof value === 'object') {
    const node: XmlNode = {};
    for (const [k, v] of Object.entries(value as Record<string, unknown>))
      if (v !== undefined) node[k] = xmlValue(v, k);
    return node;
  }
  return { '#text': String(value) };
}

/** toXml renders a resource (root = its name) or a list (root = the plural name) in SPEC's XML. */
export function toXml(value: unknown, root: string): string {
  let doc: XmlNode;
  if (Array.isArray(value) && value.length === 0) doc = { 'nil-classes': { '@_type': 'array' } };
  else doc = { [root]: xmlValue(value, root) };
  return `<?xml version="1.0" encoding="UTF-8"?>\n${builder.build(doc) as string}`;
}

/** toJson renders a value as SPEC's JSON (dates as ISO 8601). */
export function toJson(value: unknown): string {
  return JSON.stringify(value);
}

/** negotiate picks the response format: `.json`/`.xml` on the path wins over Accept (DESIGN.md). */
export function negotiate(
  path: string,
  accepts: (...types: string[]) => string | false,
): { format: Format | null; path: string } {
  const ext = /\.(json|xml)$/i.exec(path);
  if (ext) return { format: ext[1]!.toLowerCase() as Format, path: path.slice(0, -ext[0].length) };
  const chosen = accepts('application/json', 'application/xml', 'text/xml');
  if (chosen === false) return { format: null, path };
  return { format: chosen === 'application/json' ? 'json' : 'xml', path };
}

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  textNodeName: '#text',
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
  processEntities: true,
  ignoreDeclaration: true,
  ignorePiTags: true,
});

// XML bodies carry strings; nil="true" is null, type="array" a list; the core coerces the rest.
function fromXml(node: unknown): unknown {
  if (node === null || node === undefined) return '';
  if (typeof node !== 'object') return String(node);
  if (Array.isArray(node)) return node.map(fromXml);
  const obj = node as Record<string, unknown>;
  if (obj['@_nil'] === 'true') return null;
  const children = Object.entries(obj).filter(([k]) => !k.startsWith('@_') && k !== '#text');
  if (obj['@_type'] === 'array') {
    return children.flatMap(([, v]) => (Array.isArray(v) ? v.map(fromXml) : [fromXml(v)]));
  }
  if (children.length === 0) return obj['#text'] === undefined ? '' : String(obj['#text']);
  const out: Record<string, unknown> = {};
  for (const [k, v] of children) out[k] = fromXml(v);
  return out;
}

/**
 * readBody parses a request body by Content-Type into an object of fields. An empty body is {}.
 * Malformed bodies are `bad-request/invalid-body`, other media types `bad-request/unsupported-media-type`.
 */
export async function readBody(req: IncomingMessage, limit: number): Promise<Record<string, unknown>> {
  const length = req.headers['content-length'];
  const chunked = req.headers['transfer-encoding'] !== undefined;
  if (!chunked && (length === undefined || length === '0')) return {};
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  const kind =
    type === 'application/json' || type.endsWith('+json')
      ? 'json'
      : type === 'application/xml' || type === 'text/xml' || type.endsWith('+xml')
        ? 'xml'
        : type === 'application/x-www-form-urlencoded'
          ? 'form'
          : null;
  if (!kind) {
    req.resume();
    throw new GatewayError(
      'bad-request/unsupported-media-type',
      `Content-Type ${type || '(none)'} is not supported: send application/json, application/xml or application/x-www-form-urlencoded`,
    );
  }
  let text: string;
  try {
    const bytes = await getRawBody(req, { limit, length });
    // Strictly: a lenient decode turns every invalid byte into U+FFFD, so two different byte
    // strings became the same user name (issue 12).
    text = strictUtf8(bytes);
  } catch (err) {
    if (err instanceof GatewayError) throw err;
    const e = err as { type?: string };
    if (e.type === 'entity.too.large')
      throw new GatewayError('bad-request/invalid-body', `The request body is larger than ${limit} bytes`);
    if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported')
      throw new GatewayError('bad-request/invalid-input-encoding');
    throw new GatewayError('bad-request/invalid-body', 'The request body could not be read');
  }
  if (text.trim() === '') return {};
  let value: unknown;
  if (kind === 'json') {
    try {
      value = JSON.parse(text);
    } catch {
      throw new GatewayError('bad-request/invalid-body', 'The request body is not valid JSON');
    }
  } else if (kind === 'xml') {
    if (XMLValidator.validate(text) !== true)
      throw new GatewayError('bad-request/invalid-body', 'The request body is not well-formed XML');
    let doc: Record<string, unknown>;
    try {
      doc = parser.parse(text) as Record<string, unknown>;
    } catch {
      throw new GatewayError('bad-request/invalid-body', 'The request body is not well-formed XML');
    }
    // Any root element (DESIGN.md): its children are the fields.
    const roots = Object.keys(doc).filter((k) => !k.startsWith('?'));
    value = roots.length === 1 ? fromXml(doc[roots[0]!]) : null;
    if (value === '') value = {};
  } else {
    value = qs.parse(text, { depth: 2, arrayLimit: 100, parameterLimit: 200, decoder: strictFormDecode });
  }
  if (!wellFormed(value)) throw invalidEncoding();
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new GatewayError('bad-request/invalid-body', 'The request body must be an object of fields');
  }
  return value as Record<string, unknown>;
}

const invalidEncoding = () =>
  new GatewayError('bad-request/invalid-input-encoding', 'The request body is not valid UTF-8');

const utf8 = new TextDecoder('utf-8', { fatal: true });

function strictUtf8(bytes: Buffer): string {
  try {
    return utf8.decode(bytes);
  } catch {
    throw invalidEncoding();
  }
}

/** strictFormDecode decodes a form field, refusing percent-escapes that are not UTF-8 (qs keeps them as text). */
function strictFormDecode(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    throw invalidEncoding();
  }
}

/** wellFormed tells whether every string in a parsed body is well-formed Unicode (JSON's `\ud800` is not). */
function wellFormed(value: unknown): boolean {
  if (typeof value === 'string')
    return !/\p{Surrogate}/u.test(value.replace(/[\ud800-\udbff][\udc00-\udfff]/g, ''));
  if (value && typeof value === 'object')
    return Object.entries(value).every(([k, v]) => wellFormed(k) && wellFormed(v));
  return true;
}

/** parseQuery reads a query string with SPEC's bracket fields (sort_by[expires_at]=asc). */
export function parseQuery(querystring: string): Record<string, unknown> {
  return qs.parse(querystring, { depth: 2, arrayLimit: 100, parameterLimit: 200 });
}
