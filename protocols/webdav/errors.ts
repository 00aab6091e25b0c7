/**
 * The core's error families → WebDAV statuses (STYLE.md §3), with the types RFC 4918 has a more
 * precise status for. Methods answer a few statuses of their own where the same core error means
 * something else in their context (MKCOL on an existing name: 405).
 */
import { GatewayError, type ErrorFamily, type ErrorType } from '../../src/core/index.ts';
import { dav, document, type Node } from './xml.ts';

/** familyStatus maps each error family to its status; a new family fails to compile until mapped. */
export const familyStatus = {
  'bad-request': 400,
  'not-authenticated': 401,
  'not-authorized': 403,
  'not-found': 404,
  'processing-failure': 409,
  'rate-limited': 429,
  'service-unavailable': 503,
  'site-configuration': 403,
} as const satisfies Record<ErrorFamily, number>;

/** typeStatus overrides the family's status where WebDAV has a closer one. */
export const typeStatus: Partial<Record<ErrorType, number>> = {
  'bad-request/method-not-allowed': 405,
  'bad-request/cannot-download-directory': 405,
  'bad-request/unsupported-media-type': 415,
  'bad-request/attachment-too-large': 413,
  // RFC 4918 §9.8.5: source and destination the same is 403.
  'bad-request/destination-same': 403,
  // A parent that is a file is a conflict in the namespace (RFC 4918 §9.3.1, §9.7.1).
  'bad-request/folder-must-not-be-a-file': 409,
  // Overwrite: F with an existing destination (RFC 4918 §9.8.5, §10.6).
  'processing-failure/destination-exists': 412,
  'processing-failure/destination-parent-does-not-exist': 409,
  'processing-failure/file-locked': 423,
  'processing-failure/folder-locked': 423,
  'processing-failure/resource-locked': 423,
  'processing-failure/subfolder-locked': 423,
  'processing-failure/invalid-range': 416,
  'processing-failure/path-too-long': 400,
  'processing-failure/filename-too-long': 400,
  'processing-failure/invalid-filename': 400,
  // RFC 4918 §11.5: the server cannot store the representation.
  'processing-failure/insufficient-storage': 507,
  // A user over the per-user session limit (protocols/shared/listener.ts): the listener kit's
  // refusal answer, 503 with Retry-After, which HTTP clients (curl --retry, rclone) wait and retry on.
  'rate-limited/too-many-concurrent-requests': 503,
};

/** statusOf gives the WebDAV status of a core error. */
export function statusOf(err: GatewayError): number {
  return typeStatus[err.type] ?? familyStatus[err.family];
}

/**
 * DavCondition is a reply the error table does not give: a plain status (412 of a failed HTTP
 * precondition), or one with an RFC 4918 condition element in a DAV:error body
 * (`propfind-finite-depth`, `lock-token-submitted`, …).
 */
export class DavCondition extends Error {
  constructor(
    readonly status: number,
    readonly condition: string | null,
    readonly content: Node[] = [],
    message?: string,
  ) {
    super(message ?? condition ?? String(status));
    this.name = 'DavCondition';
  }

  /** body is the DAV:error document, or the message when there is no condition element. */
  body(): string {
    return this.condition ? document('error', [dav(this.condition, this.content)]) : this.message;
  }
}
