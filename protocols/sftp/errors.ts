/**
 * The core's error families → SFTP v3 status codes (STYLE.md §3's table), with the few types that
 * have a closer code. SFTP v3 has no code for "exists" or "not empty", so those are FAILURE with
 * the core's message, which OpenSSH's sftp prints.
 */
import { GatewayError, type ErrorFamily, type ErrorType } from '../../src/core/index.ts';
import { Status, type StatusCode } from './packets.ts';

/** familyStatus maps each error family to its status; a new family fails to compile until mapped. */
export const familyStatus = {
  'bad-request': Status.FAILURE,
  'not-authenticated': Status.PERMISSION_DENIED,
  'not-authorized': Status.PERMISSION_DENIED,
  'not-found': Status.NO_SUCH_FILE,
  'processing-failure': Status.FAILURE,
  'rate-limited': Status.FAILURE,
  'service-unavailable': Status.FAILURE,
  'site-configuration': Status.PERMISSION_DENIED,
} as const satisfies Record<ErrorFamily, StatusCode>;

/** typeStatus overrides the family's status where SFTP has a closer code. */
export const typeStatus: Partial<Record<ErrorType, StatusCode>> = {
  'bad-request/method-not-allowed': Status.OP_UNSUPPORTED,
  'processing-failure/destination-parent-does-not-exist': Status.NO_SUCH_FILE,
  // SFTP v3 has no "no space" code (v5's SSH_FX_NO_SPACE_ON_FILESYSTEM is not ours to send):
  // insufficient-storage is FAILURE with the core's message, which says the storage is full and
  // which OpenSSH's sftp prints.
};

/** sftpStatus gives the status code and message a core error is answered with. */
export function sftpStatus(err: GatewayError): { code: StatusCode; message: string } {
  return { code: typeStatus[err.type] ?? familyStatus[err.family], message: err.message };
}
