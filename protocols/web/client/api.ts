/**
 * The page's calls: the REST API at /api/rest/v1 with the web session cookie (sent by the browser)
 * and the CSRF token in a header on every change. Errors become sentences a person can act on.
 */

export const API = '/api/rest/v1';

/** Me is who is signed in, as /web/session reports it. */
export interface Me {
  csrf: string;
  /** how long the server keeps a session without a request */
  idle_timeout_seconds: number;
  user: {
    id: number;
    username: string;
    name: string;
    email: string;
    self_managed: boolean;
    site_admin: boolean;
    /** may share files through share links */
    attachments_permission?: boolean;
    /** where the browser opens (site path, '' for the root) */
    user_root: string;
    /** where the admin pages apply: [''] for a site admin, a Folder Admin's folders, [] for others */
    admin_folders: string[];
  };
}

/** Entry is a file or folder as the REST API lists it. */
export interface Entry {
  path: string;
  type: 'file' | 'directory';
  size: number | null;
  mtime: string;
  md5?: string | null;
}

/** ApiError is a refusal of the server, with SPEC's error type and its message in words. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly type: string,
    readonly status: number,
    /** the refusal's response headers (X-Svc-Rights on a folder one may not list) */
    readonly headers?: Headers,
    /** SPEC's model_errors of a 422: field name → messages, to show beside each field */
    readonly modelErrors?: Record<string, string[]>,
  ) {
    super(message);
  }
}

let csrf = '';
/** lastRequestAt is when the page last called the server with its session (the idle clock's start). */
export let lastRequestAt = Date.now();
/** onSignedOut is called when the server no longer accepts the session (idle timeout, sign-out elsewhere). */
let onSignedOut: (message: string) => void = () => {};

export function setSession(token: string, signedOut: (message: string) => void): void {
  csrf = token;
  onSignedOut = signedOut;
}

/** words turns an error object into a sentence; the server's own message is already in words. */
function words(status: number, body: unknown, headers?: Headers): ApiError {
  const b = (body ?? {}) as {
    error?: string;
    type?: string;
    title?: string;
    model_errors?: Record<string, string[]>;
  };
  const type = b.type ?? '';
  let message = b.error ?? b.title ?? '';
  if (!message) {
    message =
      status === 0
        ? 'The server cannot be reached. Check your connection and try again.'
        : status >= 500
          ? 'The server could not do this right now. Try again in a moment.'
          : 'The server refused this request.';
  }
  if (!/[.!?]$/.test(message)) message += '.';
  return new ApiError(message, type, status, headers, b.model_errors);
}

/** encodePath makes a site path safe in a URL, segment by segment. */
export function encodePath(path: string): string {
  return path
    .split('/')
    .filter((s) => s !== '')
    .map(encodeURIComponent)
    .join('/');
}

/** request calls the API (or /web/session); JSON in, JSON out, refusals thrown as ApiError. */
export async function request<T>(
  method: string,
  url: string,
  opts: { body?: unknown; headers?: Record<string, string>; raw?: boolean } = {},
): Promise<{ data: T; headers: Headers }> {
  // X-Requested-With: a 401 then comes without a Basic challenge, so the browser shows no prompt.
  const headers: Record<string, string> = {
    Accept: 'application/json',
    'X-Requested-With': 'svc-web',
    ...opts.headers,
  };
  if (method !== 'GET' && method !== 'HEAD') headers['X-Svc-CSRF'] = csrf;
  if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
  let res: Response;
  lastRequestAt = Date.now();
  try {
    res = await fetch(url, {
      method,
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      credentials: 'same-origin',
    });
  } catch {
    throw words(0, null);
  }
  const text = await res.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) {
    const err = words(res.status, data, res.headers);
    if (res.status === 401 && url.startsWith(API)) onSignedOut('Your session has ended. Sign in again.');
    throw err;
  }
  return { data: data as T, headers: res.headers };
}

/** sameOrigin keeps a signed URL of our own server on the page's origin (the public URL may name another host). */
export function sameOrigin(uri: string): string {
  try {
    const u = new URL(uri, location.href);
    if (/^\/(upload|download)\//.test(u.pathname)) return u.pathname + u.search;
  } catch {
    // not a URL: use as is
  }
  return uri;
}
