/**
 * The site tree's rows (DESIGN.md "Namespace in the database"). This first part holds folders
 * only, enough for the login gate's user_root check; files, listing and transfers build on it.
 */
import type { EntityManager } from 'typeorm';
import { FileEntity } from '../../db/entities.ts';
import { requireCapability } from '../access/rights.ts';
import type { CoreContext } from '../context.ts';
import { GatewayError } from '../errors.ts';
import { ancestorsOf, normalizeFolderPath } from '../paths.ts';
import type { Principal } from '../principal.ts';

/** MAX_PATH is SPEC's limit for file and folder paths. */
export const MAX_PATH = 550;

/** Namespace reads and changes the tree's rows. */
export class Namespace {
  constructor(private readonly ctx: CoreContext) {}

  /** mkdir creates a folder and any missing parents; it needs write permission on the folder. */
  async mkdir(p: Principal, input: string): Promise<void> {
    const r = normalizeFolderPath(input, MAX_PATH);
    if ('problem' in r) throw new GatewayError('bad-request/invalid-path', `Path ${r.problem}`);
    if (r.path === '')
      throw new GatewayError('processing-failure/destination-exists', 'The root folder always exists');
    await this.ctx.db.work(async (em) => {
      await requireCapability(em, p, 'write', r.path);
      await this.ensureFolders(em, r.path);
    });
  }

  /** folderExists tells whether a folder row exists ('' , the root, always does). */
  async folderExists(path: string): Promise<boolean> {
    if (path === '') return true;
    return this.ctx.db.read((em) => em.existsBy(FileEntity, { path, type: 'directory' }));
  }

  private async ensureFolders(em: EntityManager, path: string): Promise<void> {
    for (const folder of ancestorsOf(path).slice(1)) {
      const row = await em.findOneBy(FileEntity, { path: folder });
      if (row?.type === 'file')
        throw new GatewayError('bad-request/folder-must-not-be-a-file', `/${folder} is a file`);
      if (row) continue;
      const slash = folder.lastIndexOf('/');
      await em.insert(FileEntity, {
        path: folder,
        parent: slash < 0 ? '' : folder.slice(0, slash),
        name: folder.slice(slash + 1),
        type: 'directory',
        size: null,
        mtime: new Date(),
        md5: null,
        crc32: null,
        blob_id: null,
      });
    }
  }
}
