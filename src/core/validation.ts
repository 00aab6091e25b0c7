/**
 * Input validation for every core call that takes fields (users, groups, permissions, …). Inputs
 * come from JSON, XML or form bodies, where XML and forms carry only strings, so booleans and
 * integers also accept their string spellings. Failures become SPEC's
 * `processing-failure/model-save-error` with one entry per field.
 */
import { z } from 'zod';
import { GatewayError, modelSaveError } from './errors.ts';
import { normalizeFolderPath } from './paths.ts';

/** bool accepts true/false and the strings XML and forms send for them. */
export const bool = z.union(
  [
    z.boolean(),
    z
      .string()
      .trim()
      .toLowerCase()
      .pipe(z.enum(['true', 'false', '1', '0']))
      .transform((v) => v === 'true' || v === '1'),
  ],
  { error: 'must be true or false' },
);

// Every id column is a 32-bit integer: PostgreSQL fails a query comparing one with a larger
// number (a 500), so numbers outside that range are refused here, as a field error.
const int32 = z
  .number()
  .int()
  .min(-2147483648, { error: 'is out of range' })
  .max(2147483647, { error: 'is out of range' });

/** int accepts an integer in the id columns' 32-bit range, or its decimal string. */
export const int = z.union(
  [
    int32,
    z
      .string()
      .trim()
      .regex(/^-?\d+$/)
      .transform(Number)
      .pipe(int32),
  ],
  { error: 'must be an integer' },
);

/** text is a string of at most `max` characters (SPEC's Limits); numbers are taken as their text. */
export const text = (max?: number) => {
  const schema = z
    .union([z.string(), z.number().transform(String)], { error: 'must be a string' })
    .pipe(max ? z.string().max(max, { error: `is too long (maximum is ${max} characters)` }) : z.string());
  // The limit sits on the pipe's output side; the API reference (generated from the input side)
  // shows it through this metadata.
  return max ? schema.meta({ maxLength: max }) : schema;
};

/**
 * folderPath is SPEC's form of a folder field: slash-delimited, never starting with a slash, and
 * ending with one when `trailingSlash` (`user_root`) or never (a permission's or a notification's
 * `path`); '' is the site root; no `.`, `..` or empty segments. A value breaking the rule is
 * refused naming it, never stored in another form: what a client sent is what it reads back.
 */
export const folderPath = (max: number, { trailingSlash = false } = {}) =>
  text(max).transform((v, c) => {
    if (v === '') return '';
    const problems: string[] = [];
    if (v.startsWith('/')) problems.push('must not start with a slash');
    if (trailingSlash && !v.endsWith('/')) problems.push('must end with a slash');
    if (!trailingSlash && v.endsWith('/') && v !== '/') problems.push('must not end with a slash');
    const body = trailingSlash && v.endsWith('/') ? v.slice(0, -1) : v;
    const r = normalizeFolderPath(body, trailingSlash ? max - 1 : max);
    if ('problem' in r) problems.push(r.problem);
    // 'a//' as a user_root: its body 'a/' normalizes to 'a'.
    else if (problems.length === 0 && r.path !== body) problems.push('must not contain empty segments (//)');
    if ('problem' in r || problems.length) {
      for (const message of problems) c.addIssue({ code: 'custom', message });
      return z.NEVER;
    }
    return trailingSlash ? `${r.path}/` : r.path;
  });

/** idList accepts SPEC's comma-separated integer string ("1,2,3"), an array, or a number. */
export const idList = z.union(
  [
    z.array(int),
    int.transform((v) => [v]),
    z
      .string()
      .trim()
      .regex(/^(\d+(\s*,\s*\d+)*)?$/)
      .transform((v) => (v === '' ? [] : v.split(',').map((s) => Number(s.trim()))))
      .pipe(z.array(int32)),
  ],
  { error: 'must be a comma-separated list of ids' },
);

/** dateTime accepts an ISO 8601 date-time (or null/'' for none). */
export const dateTime = z.union(
  [
    z.null(),
    z.literal('').transform(() => null),
    z
      .string()
      .trim()
      .refine((v) => !Number.isNaN(Date.parse(v)))
      .transform((v) => new Date(v)),
  ],
  { error: 'must be an ISO 8601 date-time' },
);

/**
 * parseFields validates `input` against `schema` and returns the typed fields, or throws a
 * model-save-error naming each bad field. Unknown fields are ignored, as SPEC's service does.
 */
export function parseFields<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new GatewayError('bad-request/invalid-body', 'The request body must be an object of fields');
  }
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const fields: Record<string, string[]> = {};
  for (const issue of result.error.issues) {
    const field = String(issue.path[0] ?? 'base');
    const message =
      issue.code === 'invalid_type' && issue.input === undefined ? "can't be blank" : issue.message;
    (fields[field] ??= []).push(message);
  }
  throw modelSaveError(fields);
}
