/**
 * Folder paths of the account resources (permissions, notifications, user_root) in SPEC's form:
 * slash-delimited, no leading or trailing slash, '' for the site root. The file-operation path
 * normalizer of the files issue builds on the same segment rules.
 */

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
