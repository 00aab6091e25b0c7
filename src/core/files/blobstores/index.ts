/**
 * createBlobStore picks the blob store named by storage.kind. The S3 store, and with it the AWS
 * SDK, is imported only when SVC_STORAGE=s3 (STYLE.md §4): a local install never loads it.
 */
import path from 'node:path';
import { ConfigError, type Config } from '../../../config.ts';
import type { BlobStore } from '../blobstore.ts';
import { LocalBlobStore } from './local.ts';

/** createBlobStore opens the configured store: <dataDir>/blobs for `local`, the bucket for `s3`. */
export async function createBlobStore(config: Config, dataDir: string): Promise<BlobStore> {
  const { kind, s3 } = config.storage;
  if (kind === 'local') return new LocalBlobStore(path.join(dataDir, 'blobs'), config.storage.durability);
  if (!s3.bucket.trim()) {
    throw new ConfigError(
      'setting storage.s3.bucket (SVC_S3_BUCKET): a bucket name is required when storage.kind is s3 (SVC_STORAGE=s3)',
    );
  }
  const { S3BlobStore } = await import('./s3.ts');
  return new S3BlobStore({
    bucket: s3.bucket.trim(),
    region: s3.region,
    endpoint: s3.endpoint || undefined,
    publicEndpoint: s3.public_endpoint || undefined,
    forcePathStyle: s3.force_path_style,
  });
}
