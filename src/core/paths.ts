/**
 * Folder paths of the account resources (permissions, notifications, user_root) in SPEC's form:
 * slash-delimited, no leading or trailing slash, '' for the site root. The file-operation path
 * normalizer of the files issue builds on the same segment rules.
 */

import { GatewayError } from './errors.ts';

/** PathProblem is why a path was refused, worded for a model-save-error message. */
export type PathProblem = string;

// NUL and other control characters are never part of a name (DESIGN.md "Paths").
// eslint-disable-next-line no-control-regex
const controlChars = /[\u0000-\u001f\u007f]/;

/**
 * normalizeFolderPath turns `/a/b/`, `a/b` or `a//b`-free input into `a/b`, or returns the problem.
 * Leading and trailing slashes are tolerated and dropped; `.`, `..` and empty inner segments are not.
 */
export function normalizeFolderPath(
  input: string,
  maxLength: number,
): { path: string } | { problem: PathProblem } {
  if (controlChars.test(input)) return { problem: 'must not contain control characters' };
  const trimmed = input.replace(/^\/+/, '').replace(/\/+$/, '');
  if (trimmed === '') return { path: '' };
  const segments = trimmed.split('/');
  for (const s of segments) {
    if (s === '') return { problem: 'must not contain empty segments (//)' };
    if (s === '.' || s === '..') return { problem: 'must not contain . or .. segments' };
  }
  if (trimmed.length > maxLength) return { problem: `is too long (maximum is ${maxLength} characters)` };
  return { path: trimmed };
}

/** ancestorsOf lists '' (the root), then every ancestor folder, then the path itself. */
export function ancestorsOf(path: string): string[] {
  const out = [''];
  if (path === '') return out;
  const segments = path.split('/');
  for (let i = 1; i <= segments.length; i++) out.push(segments.slice(0, i).join('/'));
  return out;
}

/** MAX_PATH is SPEC's limit for a file or folder path; MAX_NAME_BYTES the limit of one name. */
export const MAX_PATH = 550;
export const MAX_NAME_BYTES = 255;

/**
 * normalizeFilePath is the one normalizer of file and folder paths for every protocol (DESIGN.md
 * "Paths"): UTF-8, `/`-separated, case-sensitive, '' for the root. Leading and trailing slashes are
 * dropped; `.`/`..` and empty segments, control characters and backslashes are
 * `bad-request/invalid-path`; a path over 550 characters is `processing-failure/path-too-long`
 * and a name over 255 bytes `processing-failure/filename-too-long`.
 */
export function normalizeFilePath(input: string): string {
  if (controlChars.test(input))
    throw new GatewayError('bad-request/invalid-path', 'Paths must not contain control characters');
  // A backslash is a separator to Windows clients and a name character to Unix ones; refusing it
  // keeps one file from meaning two things across protocols.
  if (input.includes('\\'))
    throw new GatewayError('bad-request/invalid-path', 'Paths must not contain backslashes');
  const trimmed = input.replace(/^\/+/, '').replace(/\/+$/, '');
  if (trimmed === '') return '';
  // SPEC's own rule; Windows clients cannot open such names, so they would strand the file.
  if (/\s$/.test(trimmed)) {
    throw new GatewayError(
      'bad-request/request-param-path-cannot-have-trailing-whitespace',
      'Paths must not end with whitespace',
    );
  }
  for (const s of trimmed.split('/')) {
    if (s === '')
      throw new GatewayError('bad-request/invalid-path', 'Paths must not contain empty segments (//)');
    if (s === '.' || s === '..')
      throw new GatewayError('bad-request/invalid-path', 'Paths must not contain . or .. segments');
    if (Buffer.byteLength(s) > MAX_NAME_BYTES) {
      throw new GatewayError(
        'processing-failure/filename-too-long',
        `A name may be at most ${MAX_NAME_BYTES} bytes`,
      );
    }
  }
  if ([...trimmed].length > MAX_PATH) {
    throw new GatewayError(
      'processing-failure/path-too-long',
      `A path may be at most ${MAX_PATH} characters`,
    );
  }
  return trimmed;
}

/** joinPath joins a root folder ('' or 'a/b') and a relative path. */
export function joinPath(root: string, rel: string): string {
  return root === '' ? rel : rel === '' ? root : `${root}/${rel}`;
}

/** parentOf is the folder a path is in ('' for top-level names). */
export function parentOf(path: string): string {
  const i = path.lastIndexOf('/');
  return i < 0 ? '' : path.slice(0, i);
}

/** baseName is the last segment of a path. */
export function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

/** isInside tells whether `path` is `folder` itself or below it. */
export function isInside(path: string, folder: string): boolean {
  return folder === '' || path === folder || path.startsWith(`${folder}/`);
}

/**
 * resolveChroot resolves a client path against a working directory the way FTP and SFTP expect:
 * relative to `cwd`, `.` and `..` applied, and `..` at the root staying at the root (DESIGN.md).
 * The result is normalized with normalizeFilePath.
 */
export function resolveChroot(cwd: string, input: string): string {
  const parts = input.startsWith('/') ? [] : cwd.split('/').filter(Boolean);
  for (const seg of input.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') parts.pop();
    else parts.push(seg);
  }
  return normalizeFilePath(parts.join('/'));
}
