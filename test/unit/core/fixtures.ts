/**
 * Small helpers shared by the core unit tests: catching a GatewayError of an expected type,
 * building the Principal a front end would hold for a user, and reading the Action log.
 */
import { expect } from 'chai';
import type { FindOptionsWhere } from 'typeorm';
import type { Core, ErrorType, Interface, Principal } from '../../../src/core/index.ts';
import { GatewayError } from '../../../src/core/errors.ts';
import { ActionEntity, UserEntity, type ActionRow, type UserRow } from '../../../src/db/entities.ts';
import { dbOf } from '../../helpers/internals.ts';

/** expectError awaits `work` and asserts it fails with a GatewayError of `type`, which it returns. */
export async function expectError(work: Promise<unknown>, type: ErrorType): Promise<GatewayError> {
  let caught: unknown;
  try {
    await work;
  } catch (err) {
    caught = err;
  }
  expect(caught, `expected ${type}, but the call succeeded`).to.not.equal(undefined);
  expect(caught, String(caught)).to.be.instanceOf(GatewayError);
  expect((caught as GatewayError).type, (caught as GatewayError).message).to.equal(type);
  return caught as GatewayError;
}

/** expectModelError asserts a model-save-error naming `field` and returns that field's messages. */
export async function expectModelError(work: Promise<unknown>, field: string): Promise<string[]> {
  const err = await expectError(work, 'processing-failure/model-save-error');
  expect(err.model, 'model errors').to.not.equal(undefined);
  expect(err.model!.model_errors, err.message).to.have.property(field);
  const messages = err.model!.model_errors[field]!;
  expect(messages).to.be.an('array').that.is.not.empty;
  expect(err.model!.errors.length).to.be.greaterThan(0);
  return messages;
}

/** userRow reads a user's current row. */
export async function userRow(core: Core, id: number): Promise<UserRow> {
  const row = await dbOf(core).read((em) => em.findOneBy(UserEntity, { id }));
  expect(row, `user ${id}`).to.not.equal(null);
  return row!;
}

/** principalFor builds the Principal a front end would hold after the user logged in. */
export async function principalFor(
  core: Core,
  id: number,
  iface: Interface = 'restapi',
  ip = '127.0.0.1',
): Promise<Principal> {
  return { user: await userRow(core, id), apiKey: null, sessionDigest: null, interface: iface, ip };
}

/** actions reads Action rows, oldest first, optionally filtered. */
export function actions(core: Core, where: FindOptionsWhere<ActionRow> = {}): Promise<ActionRow[]> {
  return dbOf(core).read((em) => em.find(ActionEntity, { where, order: { id: 'ASC' } }));
}

let seq = 0;
/** unique returns a name no other test of this run uses (usernames and group names are unique). */
export function unique(prefix: string): string {
  seq += 1;
  return `${prefix}${seq}`;
}

let ipSeq = 0;
/** freshIp returns a client IPv4 address no other test of this run logs in from. */
export function freshIp(): string {
  ipSeq += 1;
  return `198.18.${Math.floor(ipSeq / 250)}.${(ipSeq % 250) + 1}`;
}
