/**
 * The core's error families → FTP reply codes (STYLE.md §3), with the few types FTP has a closer
 * reply for. Only a GatewayError's message reaches the client; anything else is a bug, logged
 * with an id the client also gets.
 */
import { randomUUID } from 'node:crypto';
import { GatewayError, type ErrorFamily, type ErrorType } from '../../src/core/index.ts';
import type { Logger } from '../../src/log.ts';

/** FtpReply is a reply code and its text; `close` ends the session after sending it. */
export interface FtpReply {
  code: number;
  text: string;
  close?: boolean;
}

/** familyReply maps each error family to its reply; a new family fails to compile until mapped. */
export const familyReply = {
  'bad-request': { code: 501, text: 'Syntax error in parameters' },
  'not-authenticated': { code: 530, text: 'Not logged in' },
  'not-authorized': { code: 550, text: 'Permission denied' },
  'not-found': { code: 550, text: 'No such file or directory' },
  'processing-failure': { code: 550, text: 'Requested action not taken' },
  'rate-limited': { code: 421, text: 'Too many attempts; closing the connection', close: true },
  'service-unavailable': { code: 421, text: 'Service not available', close: true },
  'site-configuration': { code: 550, text: 'Not allowed by the site configuration' },
} as const satisfies Record<ErrorFamily, FtpReply>;

/** typeReply overrides the family's code where FTP has a closer one. */
export const typeReply: Partial<Record<ErrorType, number>> = {
  // A name the server refuses is 553 "File name not allowed" (RFC 959).
  'bad-request/invalid-path': 553,
  'processing-failure/path-too-long': 553,
  'processing-failure/filename-too-long': 553,
  'bad-request/method-not-allowed': 502,
  'processing-failure/file-locked': 450,
  'processing-failure/folder-locked': 450,
  'processing-failure/resource-locked': 450,
  'bad-request/invalid-upload-offset': 554,
  'processing-failure/invalid-range': 554,
  'processing-failure/file-not-uploaded': 426,
  // RFC 959's 552 "exceeded storage allocation", not 452 "insufficient storage space": a 4xx
  // reply is transient, and lftp 4.9 then retries the STOR at once, closing the data connection
  // after part of the file, which stream mode must take for the whole file (a truncated upload).
  'processing-failure/insufficient-storage': 552,
  // A database that does not answer for a moment: 451 "local error in processing" keeps the
  // session (the login stays valid); the gate's own login-unavailable still closes with 421.
  'service-unavailable/database-unavailable': 451,
};

/** replyFor maps a core error to its reply; the text is the error's own message. */
export function replyFor(err: GatewayError): FtpReply {
  const family: FtpReply = familyReply[err.family];
  const code = typeReply[err.type];
  // A type's own code replaces the family's reply, its closing of the session included.
  if (code !== undefined) return { code, text: err.message || family.text };
  return { code: family.code, text: err.message || family.text, close: family.close };
}

/** replyForUnknown maps anything thrown to a reply, logging what is not a GatewayError (a bug). */
export function replyForUnknown(err: unknown, log: Logger): FtpReply {
  if (err instanceof ReplyError) return { code: err.code, text: err.message };
  if (err instanceof GatewayError) return replyFor(err);
  const instance = randomUUID();
  log.error('unexpected error', { instance, error: (err as Error)?.stack ?? String(err) });
  return { code: 451, text: `Local error in processing (instance ${instance})` };
}

/** ReplyError is a protocol-level refusal (bad sequence, unsupported parameter) with its reply. */
export class ReplyError extends Error {
  constructor(
    readonly code: number,
    text: string,
  ) {
    super(text);
    this.name = 'ReplyError';
  }
}
