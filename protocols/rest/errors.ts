/**
 * The core's error families → HTTP statuses (DESIGN.md "Error statuses"), with the few types that
 * HTTP has a more precise status for. The body is SPEC's error object.
 */
import { GatewayError, type ErrorFamily, type ErrorType } from '../../src/core/index.ts';

/** familyStatus maps each error family to its status; a new family fails to compile until mapped. */
export const familyStatus = {
  'bad-request': 400,
  'not-authenticated': 401,
  'not-authorized': 403,
  'not-found': 404,
  'processing-failure': 422,
  'rate-limited': 429,
  'service-unavailable': 503,
  'site-configuration': 403,
} as const satisfies Record<ErrorFamily, number>;

/** typeStatus overrides the family's status where HTTP has a closer one. */
export const typeStatus: Partial<Record<ErrorType, number>> = {
  'bad-request/method-not-allowed': 405,
  'bad-request/unsupported-media-type': 415,
  'bad-request/unsupported-http-response-format': 406,
  // A download URL asked for bytes the file does not have: HTTP's own status for it.
  'processing-failure/invalid-range': 416,
  'processing-failure/file-locked': 423,
  'processing-failure/folder-locked': 423,
  'processing-failure/resource-locked': 423,
  // RFC 4918 §11.5 "Insufficient Storage", the status HTTP clients know for a full store.
  'processing-failure/insufficient-storage': 507,
  // A user over the per-user session limit (protocols/shared/listener.ts): the listener kit's
  // refusal answer, 503 with Retry-After, which HTTP clients (curl --retry, rclone) wait and retry on.
  'rate-limited/too-many-concurrent-requests': 503,
};

/** statusOf gives the HTTP status of a core error. */
export function statusOf(err: GatewayError): number {
  return typeStatus[err.type] ?? familyStatus[err.family];
}

/** errorObject builds SPEC's error object (plus the model-save fields where they apply). */
export function errorObject(err: GatewayError, instance: string): Record<string, unknown> {
  return {
    error: err.message,
    'http-code': statusOf(err),
    instance,
    title: err.title,
    type: err.type,
    ...(err.model ?? {}),
  };
}
