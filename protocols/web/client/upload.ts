/**
 * One file's upload through SPEC's multi-step upload: action=put opens it and gives the first
 * part's URL, each further part asks for its own URL, action=end commits. Parts are sent with
 * XMLHttpRequest (fetch reports no upload progress); a part that fails on the network is retried
 * with a fresh URL, so a dropped connection costs one part, not the file.
 *
 * The upload's ref and the parts the server has confirmed are kept in localStorage (resume.ts):
 * after a reload, or a failure, choosing the same file for the same place again continues the
 * same upload and sends only the parts the server does not have.
 */
import { API, ApiError, encodePath, request, sameOrigin } from './api.ts';
import { forgetUpload, rememberUpload, recalled, type Remembered } from './resume.ts';

interface Upload {
  ref: string;
  upload_uri: string;
  partsize: number;
  available_parts: number;
  http_method: string;
}

const PART_RETRIES = 3;
// Parts of 32 MiB (SPEC: at least 5 MB but the last), not the 64 MiB the server suggests for
// scripts: a browser on a flaky link then resends little, and progress moves evenly (measured on
// the 2-core machine: 8 MiB parts 76 MB/s, 32 MiB 111 MB/s; README "Benchmarks"). A file of one
// part is adopted by the server as it is; larger ones are joined at the end. Files over 320 GB
// get larger parts to stay within the available part numbers.
const PART = 32 * 1024 * 1024;

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

/** UploadProgress reports an upload: bytes the server has or is receiving, and bytes resumed. */
export interface UploadProgress {
  sent: number;
  /** bytes the server already had from an earlier, interrupted try (0 for a new upload) */
  resumed: number;
}

/** uploadFile sends `file` to the site path `path`, reporting bytes sent so far. */
export async function uploadFile(
  path: string,
  file: File,
  progress: (p: UploadProgress) => void,
  signal: AbortSignal,
): Promise<void> {
  const url = `${API}/files/${encodePath(path)}`;
  const parts = (size: number) => Math.max(1, Math.ceil(file.size / size));
  // An earlier try of this file for this place: its ref still works if the server answers a part URL.
  let memo: Remembered | null = recalled(path, file);
  let first: Upload | null = null;
  if (memo) {
    const missing = Array.from({ length: parts(memo.partSize) }, (_, i) => i + 1).find(
      (n) => !memo!.done.includes(n),
    );
    try {
      first = (
        await request<Upload>('POST', url, { body: { action: 'put', ref: memo.ref, part: missing ?? 1 } })
      ).data;
    } catch (err) {
      // Expired, ended or another user's: start afresh.
      if (!(err instanceof ApiError) || err.status === 0) throw err;
      forgetUpload(path, file);
      memo = null;
    }
  }
  if (!memo || !first) {
    first = (await request<Upload>('POST', url, { body: { action: 'put' } })).data;
    memo = {
      ref: first.ref,
      partSize: Math.max(PART, Math.ceil(file.size / first.available_parts)),
      done: [],
      sent: 0,
    };
    rememberUpload(path, file, memo);
  }
  const m = memo;
  const partSize = m.partSize;
  const count = parts(partSize);
  const sizeOf = (n: number) => Math.min(file.size, n * partSize) - (n - 1) * partSize;
  const resumed = m.done.reduce((s, n) => s + sizeOf(n), 0);
  // Bytes sent of each part in flight or done; progress is their sum.
  const sent = new Map<number, number>(m.done.map((n) => [n, sizeOf(n)]));
  const report = () => progress({ sent: [...sent.values()].reduce((a, b) => a + b, 0), resumed });
  report();
  const todo = Array.from({ length: count }, (_, i) => i + 1).filter((n) => !m.done.includes(n));
  let firstTarget: Upload | null = first;
  const sendOne = async (n: number) => {
    const blob = file.slice((n - 1) * partSize, (n - 1) * partSize + sizeOf(n));
    for (let attempt = 1; ; attempt++) {
      if (signal.aborted) throw new ApiError('The upload was cancelled.', 'aborted', 0);
      // The URL that opened (or reopened) the upload is for the first part still to send.
      const target =
        firstTarget && n === todo[0] && attempt === 1
          ? firstTarget
          : (await request<Upload>('POST', url, { body: { action: 'put', ref: m.ref, part: n } })).data;
      if (n === todo[0]) firstTarget = null;
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
    // Confirmed by the server: kept, so a reload sends it no more.
    m.done.push(n);
    m.sent = [...sent.values()].reduce((a, b) => a + b, 0);
    rememberUpload(path, file, m);
    report();
  };
  // Two parts at a time: one is on the wire while the other asks for its URL or finishes.
  let next = 0;
  let failed = false;
  const lane = async () => {
    try {
      while (next < todo.length && !failed) await sendOne(todo[next++]!);
    } catch (err) {
      failed = true;
      throw err;
    }
  };
  await Promise.all([lane(), lane()]);
  await request('POST', url, { body: { action: 'end', ref: m.ref } });
  forgetUpload(path, file);
}
