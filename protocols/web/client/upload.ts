/**
 * One file's upload through SPEC's multi-step upload: action=put opens it and gives the first
 * part's URL, each further part asks for its own URL, action=end commits. Parts are sent with
 * XMLHttpRequest (fetch reports no upload progress); a part that fails on the network is retried
 * with a fresh URL, so a dropped connection costs one part, not the file.
 */
import { API, ApiError, encodePath, request, sameOrigin } from './api.ts';

interface Upload {
  ref: string;
  upload_uri: string;
  partsize: number;
  available_parts: number;
  http_method: string;
}

const PART_RETRIES = 3;
// Parts of 16 MiB (SPEC: at least 5 MB but the last), not the 64 MiB the server suggests for
// scripts: a browser on a flaky link then resends little, and progress moves evenly (measured on
// the 2-core machine: 8 MiB parts 76 MB/s, 32 MiB 111 MB/s; README "Benchmarks"). Files over
// 160 GB get larger parts to stay within the available part numbers.
const PART = 16 * 1024 * 1024;

function sendPart(
  url: string,
  method: string,
  body: Blob,
  progress: (sent: number) => void,
  signal: AbortSignal,
) {
  return new Promise<void>((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open(method, url);
    xhr.upload.onprogress = (e) => progress(e.loaded);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) return resolve();
      let message = `The server refused part of the upload.`;
      let type = '';
      try {
        const b = JSON.parse(xhr.responseText) as { error?: string; type?: string };
        if (b.error) message = b.error;
        type = b.type ?? '';
      } catch {
        // not JSON (an object store's XML): keep the general sentence
      }
      reject(new ApiError(message, type, xhr.status));
    };
    xhr.onerror = () => reject(new ApiError('The connection dropped while sending.', 'network', 0));
    xhr.onabort = () => reject(new ApiError('The upload was cancelled.', 'aborted', 0));
    signal.addEventListener('abort', () => xhr.abort(), { once: true });
    xhr.send(body);
  });
}

/** uploadFile sends `file` to the site path `path`, reporting bytes sent so far. */
export async function uploadFile(
  path: string,
  file: Blob,
  progress: (sent: number) => void,
  signal: AbortSignal,
): Promise<void> {
  const url = `${API}/files/${encodePath(path)}`;
  const { data: first } = await request<Upload>('POST', url, { body: { action: 'put' } });
  const partSize = Math.max(PART, Math.ceil(file.size / first.available_parts));
  const parts = Math.max(1, Math.ceil(file.size / partSize));
  // Bytes sent of each part in flight or done; progress is their sum.
  const sent = new Map<number, number>();
  const report = () => progress([...sent.values()].reduce((a, b) => a + b, 0));
  const sendOne = async (n: number) => {
    const blob = file.slice((n - 1) * partSize, Math.min(file.size, n * partSize));
    for (let attempt = 1; ; attempt++) {
      if (signal.aborted) throw new ApiError('The upload was cancelled.', 'aborted', 0);
      const target =
        n === 1 && attempt === 1
          ? first
          : (await request<Upload>('POST', url, { body: { action: 'put', ref: first.ref, part: n } })).data;
      try {
        await sendPart(
          sameOrigin(target.upload_uri),
          target.http_method || 'PUT',
          blob,
          (s) => {
            sent.set(n, s);
            report();
          },
          signal,
        );
        break;
      } catch (err) {
        sent.set(n, 0);
        const network = err instanceof ApiError && err.status === 0 && err.type === 'network';
        if (!network || attempt >= PART_RETRIES) throw err;
        await new Promise((r) => setTimeout(r, 500 * attempt));
      }
    }
    sent.set(n, blob.size);
    report();
  };
  // Two parts at a time: one is on the wire while the other asks for its URL or finishes.
  let next = 1;
  let failed = false;
  const lane = async () => {
    try {
      while (next <= parts && !failed) await sendOne(next++);
    } catch (err) {
      failed = true;
      throw err;
    }
  };
  await Promise.all([lane(), lane()]);
  await request('POST', url, { body: { action: 'end', ref: first.ref } });
}
