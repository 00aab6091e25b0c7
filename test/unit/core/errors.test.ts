import { expect } from 'chai';
import {
  classifyDatabaseError,
  classifyStorageError,
  databaseUnreachableCause,
  errorTitle,
  errorTypes,
  GatewayError,
  modelSaveError,
} from '../../../src/core/errors.ts';
import { LogThrottle } from '../../../src/log.ts';
import { errorObject, statusOf } from '../../../protocols/rest/errors.ts';
import { retryAfter } from '../../../protocols/shared/retry.ts';
import { sftpStatus } from '../../../protocols/sftp/errors.ts';
import {
  familyStatus as davFamilyStatus,
  statusOf as davStatusOf,
} from '../../../protocols/webdav/errors.ts';
import { replyFor as ftpReplyFor } from '../../../protocols/ftp/errors.ts';

describe('error catalogue', () => {
  it("holds every one of SPEC's families and the types the issue names", () => {
    const families = new Set(errorTypes.map((t) => t.split('/')[0]));
    expect([...families].sort()).to.deep.equal([
      'bad-request',
      'not-authenticated',
      'not-authorized',
      'not-found',
      'processing-failure',
      'rate-limited',
      'service-unavailable',
      'site-configuration',
    ]);
    for (const t of [
      'bad-request/invalid-cursor',
      'not-authenticated/locked-out',
      'not-authorized/site-admin-required',
      'processing-failure/model-save-error',
      'rate-limited/too-many-login-attempts',
    ] as const) {
      expect(errorTypes).to.include(t);
    }
    expect(errorTitle('not-authorized/site-admin-required')).to.equal('Site Admin Required');
  });

  it('maps every type to a REST status and SPEC error object (DESIGN.md statuses)', () => {
    const expected: Record<string, number> = {
      'bad-request': 400,
      'not-authenticated': 401,
      'not-authorized': 403,
      'not-found': 404,
      'processing-failure': 422,
      'rate-limited': 429,
      'service-unavailable': 503,
      'site-configuration': 403,
    };
    for (const type of errorTypes) {
      const err = new GatewayError(type);
      const status = statusOf(err);
      expect(status, type).to.be.within(400, 599);
      if (
        ![
          'bad-request/method-not-allowed',
          'bad-request/unsupported-media-type',
          'bad-request/unsupported-http-response-format',
          'processing-failure/invalid-range',
          'processing-failure/insufficient-storage',
          'rate-limited/too-many-concurrent-requests',
        ].includes(type) &&
        !type.endsWith('-locked')
      ) {
        expect(status, type).to.equal(expected[err.family]);
      }
      if (type === 'rate-limited/too-many-concurrent-requests') expect(status, type).to.equal(503);
      const body = errorObject(err, 'id-1');
      expect(body).to.include({ 'http-code': status, instance: 'id-1', type });
      expect(body.title).to.be.a('string').and.not.equal('');
      expect(body.error).to.be.a('string').and.not.equal('');
    }
    expect(statusOf(new GatewayError('processing-failure/file-locked'))).to.equal(423);
    expect(statusOf(new GatewayError('bad-request/method-not-allowed'))).to.equal(405);
    expect(statusOf(new GatewayError('processing-failure/invalid-range'))).to.equal(416);
    expect(statusOf(new GatewayError('processing-failure/insufficient-storage'))).to.equal(507);
    expect(retryAfter(new GatewayError('service-unavailable/database-unavailable'))).to.match(/^\d+$/);
    expect(retryAfter(new GatewayError('processing-failure/insufficient-storage'))).to.equal(null);
  });

  it('maps every type to an FTP reply (STYLE.md §3 table)', () => {
    const expected: Record<string, number> = {
      'bad-request': 501,
      'not-authenticated': 530,
      'not-authorized': 550,
      'not-found': 550,
      'processing-failure': 550,
      'rate-limited': 421,
      'service-unavailable': 421,
      'site-configuration': 550,
    };
    const overrides: Record<string, number> = {
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
      'processing-failure/insufficient-storage': 552,
      'service-unavailable/database-unavailable': 451,
    };
    for (const type of errorTypes) {
      const reply = ftpReplyFor(new GatewayError(type));
      expect(reply.code, type).to.equal(overrides[type] ?? expected[type.split('/')[0]!]);
      expect(reply.text, type).to.be.a('string').and.not.equal('');
      expect(reply.text, type).to.not.match(/[\r\n]/);
    }
    expect(ftpReplyFor(new GatewayError('rate-limited/too-many-login-attempts')).close).to.equal(true);
    // A database outage keeps the session (451); the gate's own refusal still closes it (421).
    expect(ftpReplyFor(new GatewayError('service-unavailable/database-unavailable')).close).to.not.equal(
      true,
    );
    expect(ftpReplyFor(new GatewayError('service-unavailable/login-unavailable')).close).to.equal(true);
  });

  it('maps every type to a WebDAV status (STYLE.md §3 table)', () => {
    const overrides: Record<string, number> = {
      'bad-request/method-not-allowed': 405,
      'bad-request/cannot-download-directory': 405,
      'bad-request/unsupported-media-type': 415,
      'bad-request/attachment-too-large': 413,
      'bad-request/destination-same': 403,
      'bad-request/folder-must-not-be-a-file': 409,
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
      'processing-failure/insufficient-storage': 507,
      // the per-user session limit: the listener kit's refusal, 503 with Retry-After
      'rate-limited/too-many-concurrent-requests': 503,
    };
    for (const type of errorTypes) {
      const err = new GatewayError(type);
      const status = davStatusOf(err);
      expect(status, type).to.be.within(400, 599);
      expect(status, type).to.equal(overrides[type] ?? davFamilyStatus[err.family]);
    }
    expect(davStatusOf(new GatewayError('not-authenticated/locked-out'))).to.equal(401);
    expect(davStatusOf(new GatewayError('processing-failure/folder-not-empty'))).to.equal(409);
  });

  it('maps every type to an SFTP v3 status (STYLE.md §3 table)', () => {
    // SFTP v3: OK 0 … OP_UNSUPPORTED 8; an error is never OK or EOF.
    const expected: Record<string, number> = {
      'bad-request': 4,
      'not-authenticated': 3,
      'not-authorized': 3,
      'not-found': 2,
      'processing-failure': 4,
      'rate-limited': 4,
      'service-unavailable': 4,
      'site-configuration': 3,
    };
    const overrides: Record<string, number> = {
      'bad-request/method-not-allowed': 8,
      'processing-failure/destination-parent-does-not-exist': 2,
    };
    for (const type of errorTypes) {
      const { code, message } = sftpStatus(new GatewayError(type));
      expect(code, type).to.equal(overrides[type] ?? expected[type.split('/')[0]!]);
      expect(message, type).to.be.a('string').and.not.equal('');
    }
  });

  it('carries the model-save fields in the error object', () => {
    const body = errorObject(modelSaveError({ username: ['has already been taken'] }), 'x');
    expect(body).to.deep.include({
      type: 'processing-failure/model-save-error',
      'http-code': 422,
      errors: ['Username has already been taken'],
      model_errors: { username: ['has already been taken'] },
    });
    expect(body.model_error_keys).to.have.property('username');
  });
});

describe('fault classification (issue 12)', () => {
  const sys = (code: string) => Object.assign(new Error(code), { code });

  it('a full disk or quota is insufficient-storage; other storage errors stay as they are', () => {
    for (const err of [
      sys('ENOSPC'),
      sys('EDQUOT'),
      Object.assign(new Error('full'), { name: 'XMinioStorageFull', $metadata: { httpStatusCode: 507 } }),
    ])
      expect((classifyStorageError(err) as GatewayError).type).to.equal(
        'processing-failure/insufficient-storage',
      );
    const other = sys('EACCES');
    expect(classifyStorageError(other)).to.equal(other);
  });

  it('a database that does not answer is database-unavailable; a constraint or a bug is not', () => {
    for (const err of [
      sys('ECONNREFUSED'),
      sys('ECONNRESET'),
      sys('57P01'),
      sys('08006'),
      Object.assign(new Error('query failed'), { driverError: { code: 'SQLITE_BUSY' } }),
      new Error('Connection terminated unexpectedly'),
      new AggregateError([sys('ECONNREFUSED')], 'connect failed'),
    ])
      expect((classifyDatabaseError(err) as GatewayError).type, String(err)).to.equal(
        'service-unavailable/database-unavailable',
      );
    expect((classifyDatabaseError(sys('SQLITE_FULL')) as GatewayError).type).to.equal(
      'processing-failure/insufficient-storage',
    );
    for (const err of [sys('23505'), sys('SQLITE_CONSTRAINT_UNIQUE'), new TypeError('x is undefined')]) {
      expect(databaseUnreachableCause(err)).to.equal(null);
      expect(classifyDatabaseError(err)).to.equal(err);
    }
  });

  it('LogThrottle lets one line per key through per window and counts the rest', () => {
    const t = new LogThrottle(1000);
    expect(t.take('a', 0)).to.deep.equal({ held: 0 });
    expect(t.take('a', 10)).to.equal(null);
    expect(t.take('a', 999)).to.equal(null);
    expect(t.take('b', 20)).to.deep.equal({ held: 0 });
    expect(t.take('a', 1000)).to.deep.equal({ held: 2 });
  });
});
