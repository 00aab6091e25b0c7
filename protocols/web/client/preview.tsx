/**
 * Preview of one file in a dialog: an image as <img>, a PDF in the browser's own viewer (a frame
 * of our own origin), anything else as text if it is text (its first 256 KiB, shown as text, never
 * as HTML). The bytes come from the file's signed download URL, so a preview is a download: it
 * needs read permission and is recorded as a `read` Action. A share link's page passes its own
 * /preview/ URL instead.
 */
import { useEffect, useState } from 'preact/hooks';
import { API, ApiError, encodePath, request, sameOrigin, type Entry } from './api.ts';
import { Dialog } from './dialogs.tsx';
import { formatSize, nameOf } from './paths.ts';

/** TEXT_CAP is how much of a text file a preview shows. */
export const TEXT_CAP = 256 * 1024;

/** IMAGE_CAP is the largest image a preview draws (a bigger one would hold the browser for long). */
const IMAGE_CAP = 64 * 1024 * 1024;

const IMAGE = /\.(png|jpe?g|gif|webp|avif|bmp)$/i;
const PDF = /\.pdf$/i;

type Shown =
  | { kind: 'loading' }
  | { kind: 'image' | 'pdf'; url: string }
  | { kind: 'text'; text: string; cut: boolean }
  | { kind: 'none'; message: string };

/** inline asks the download URL for the file shown in place (the server allows only safe types). */
const inline = (url: string) => `${url}${url.includes('?') ? '&' : '?'}disposition=inline`;

/** PreviewUrls are where a preview reads a file: shown in place (images, PDF), or its bytes (text). */
export interface PreviewUrls {
  inline: string;
  bytes: string;
}

/** signedUrls asks the API for the file's signed download URL (the signed-in page's previews). */
async function signedUrls(entry: Entry): Promise<PreviewUrls> {
  const { data } = await request<Entry & { download_uri: string }>(
    'GET',
    `${API}/files/${encodePath(entry.path)}`,
  );
  const url = sameOrigin(data.download_uri);
  return { inline: inline(url), bytes: url };
}

async function load(entry: Entry, urls: (entry: Entry) => Promise<PreviewUrls>): Promise<Shown> {
  if (IMAGE.test(entry.path) && (entry.size ?? 0) > IMAGE_CAP)
    return {
      kind: 'none',
      message: `This image is too large to preview (over ${formatSize(IMAGE_CAP)}). Download it to open it.`,
    };
  const at = await urls(entry);
  if (IMAGE.test(entry.path)) return { kind: 'image', url: at.inline };
  if (PDF.test(entry.path)) return { kind: 'pdf', url: at.inline };
  if (!entry.size) return { kind: 'text', text: '', cut: false };
  const url = at.bytes;
  let res: Response;
  try {
    res = await fetch(url, { headers: { Range: `bytes=0-${TEXT_CAP - 1}` }, credentials: 'same-origin' });
  } catch {
    throw new ApiError('The server cannot be reached. Check your connection and try again.', 'network', 0);
  }
  if (!res.ok) throw new ApiError('The file could not be read for a preview.', '', res.status);
  const bytes = new Uint8Array(await res.arrayBuffer());
  // Text has no NUL bytes and decodes as UTF-8 (a character cut at the cap aside).
  let text = '';
  try {
    if (bytes.includes(0)) throw new Error('binary');
    const end = bytes.length === TEXT_CAP ? bytes.length - 4 : bytes.length;
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(0, end));
    text += new TextDecoder('utf-8').decode(bytes.subarray(end)).replace(/\uFFFD+$/, '');
  } catch {
    return {
      kind: 'none',
      message: 'This file cannot be previewed: it is not text, an image or a PDF. Download it to open it.',
    };
  }
  return { kind: 'text', text, cut: (entry.size ?? 0) > bytes.length };
}

/** Preview shows one file; Download saves it, Close (or Escape) ends the preview. */
export function Preview(props: {
  entry: Entry;
  onDownload?: () => void;
  onClose: () => void;
  /** where the bytes come from: the signed download URL unless given (a share link's /preview/) */
  urls?: (entry: Entry) => Promise<PreviewUrls>;
}) {
  const { entry } = props;
  const name = nameOf(entry.path);
  const [shown, setShown] = useState<Shown>({ kind: 'loading' });
  useEffect(() => {
    let live = true;
    load(entry, props.urls ?? signedUrls)
      .then((s) => live && setShown(s))
      .catch(
        (err: unknown) =>
          live && setShown({ kind: 'none', message: err instanceof Error ? err.message : String(err) }),
      );
    return () => {
      live = false;
    };
  }, [entry.path]);
  return (
    <Dialog title={`Preview of ${name}`} onClose={props.onClose} wide>
      <div class="preview">
        {shown.kind === 'loading' && <p>Loading…</p>}
        {shown.kind === 'image' && <img src={shown.url} alt={name} />}
        {shown.kind === 'pdf' && <iframe src={shown.url} title={`${name} (PDF)`} />}
        {shown.kind === 'text' && (
          <>
            <pre tabIndex={0} aria-label={`Text of ${name}`}>
              {shown.text}
            </pre>
            {shown.cut && (
              <p class="hint">
                Showing the first {formatSize(TEXT_CAP)} of {formatSize(entry.size)}. Download the file to see
                all of it.
              </p>
            )}
          </>
        )}
        {shown.kind === 'none' && (
          <p class="notice" role="alert">
            {shown.message}
          </p>
        )}
      </div>
      <div class="buttons">
        {props.onDownload && (
          <button type="button" onClick={props.onDownload}>
            Download
          </button>
        )}
        <button type="button" onClick={props.onClose} autoFocus>
          Close
        </button>
      </div>
    </Dialog>
  );
}
