/**
 * Migration 0010 (issue 11 item 6): rows whose user_root, permission path or notification path
 * were written outside the API with slashes SPEC does not allow are rewritten in SPEC's form, and
 * a permission or notification that then repeats another is dropped.
 */
import { expect } from 'chai';
import { NotificationEntity, PermissionEntity, UserEntity } from '../../../src/db/entities.ts';
import { operatorPrincipal } from '../../../src/core/principal.ts';
import { PathFieldsForm1764892800000 } from '../../../src/db/migrations/0010-path-fields-form.ts';
import { dbKind, openTestCore, type TestCore } from '../../helpers/gateway.ts';
import { dbOf } from '../../helpers/internals.ts';

describe(`migration 0010: path fields in SPEC's form (${dbKind})`, () => {
  let t: TestCore;
  before(async () => {
    t = await openTestCore();
  });
  after(async () => t.close());

  it('rewrites user_root, permission and notification paths written with slashes SPEC refuses', async () => {
    expect(dbOf(t.core).source.migrations.map((m) => m.name)).to.include('PathFieldsForm1764892800000');
    const op = operatorPrincipal();
    const user = async (username: string) =>
      (await t.core.users.create(op, { username, password: 'user-password-1' })).id;
    const [a, b, c, d] = [
      await user('rooted'),
      await user('bare'),
      await user('slashes'),
      await user('kept'),
    ];
    await dbOf(t.core).work(async (em) => {
      for (const [id, root] of [
        [a, '/home/rooted/'],
        [b, 'home/bare'],
        [c, '//home//slashes'],
        [d, 'home/kept/'],
      ] as const)
        await em.update(UserEntity, { id }, { user_root: root });
      const perm = (user_id: number, path: string, permission: 'full' | 'readonly' = 'full') =>
        em.insert(PermissionEntity, { user_id, group_id: null, path, permission, created_at: new Date() });
      await perm(a, 'home/rooted');
      await perm(a, '/home/rooted/'); // the same right twice once rewritten: dropped
      await perm(b, '/home/bare', 'readonly');
      const note = (user_id: number, path: string) =>
        em.insert(NotificationEntity, { user_id, path, created_at: new Date() });
      await note(a, 'reports/');
      await note(b, 'reports');
      await note(b, '/reports'); // repeats b's: dropped
    });
    // Run again on these rows (it ran on the empty tables when the core opened), as a later
    // migration in the list would not let it be undone and redone alone.
    const runner = dbOf(t.core).source.createQueryRunner();
    try {
      await new PathFieldsForm1764892800000().up(runner);
    } finally {
      await runner.release();
    }

    const roots = await dbOf(t.core).read((em) => em.find(UserEntity, { order: { id: 'ASC' } }));
    const rootOf = (id: number) => roots.find((r) => r.id === id)!.user_root;
    expect([a, b, c, d].map(rootOf)).to.deep.equal([
      'home/rooted/',
      'home/bare/',
      'home/slashes/',
      'home/kept/',
    ]);
    const perms = await dbOf(t.core).read((em) => em.find(PermissionEntity, { order: { id: 'ASC' } }));
    expect(perms.map((p) => [p.user_id, p.path, p.permission])).to.deep.equal([
      [a, 'home/rooted', 'full'],
      [b, 'home/bare', 'readonly'],
    ]);
    const notes = await dbOf(t.core).read((em) => em.find(NotificationEntity, { order: { id: 'ASC' } }));
    expect(notes.map((n) => [n.user_id, n.path])).to.deep.equal([
      [a, 'reports'],
      [b, 'reports'],
    ]);
  });
});
