import { expect } from 'chai';
import { errorTitle, errorTypes, GatewayError, modelSaveError } from '../../../src/core/errors.ts';
import { errorObject, statusOf } from '../../../protocols/rest/errors.ts';

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
        ].includes(type) &&
        !type.endsWith('-locked')
      ) {
        expect(status, type).to.equal(expected[err.family]);
      }
      const body = errorObject(err, 'id-1');
      expect(body).to.include({ 'http-code': status, instance: 'id-1', type });
      expect(body.title).to.be.a('string').and.not.equal('');
      expect(body.error).to.be.a('string').and.not.equal('');
    }
    expect(statusOf(new GatewayError('processing-failure/file-locked'))).to.equal(423);
    expect(statusOf(new GatewayError('bad-request/method-not-allowed'))).to.equal(405);
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
