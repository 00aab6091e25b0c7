/**
 * Previews in the browser, shared by the signed download URL and share links: which files may be
 * shown inline, and how much of any other file a text preview reads.
 */

/** PREVIEW_TEXT_BYTES is how much of a file a text preview shows (the web page's TEXT_CAP). */
export const PREVIEW_TEXT_BYTES = 256 * 1024;

/**
 * PREVIEW_TYPES are the types a download may be shown inline as (the web page's previews: a signed
 * download with `?disposition=inline`, a share link's /preview/): images a browser draws and PDF for its own viewer. Nothing that runs script on
 * our origin (HTML, SVG, XML) is ever served inline; any other file stays an attachment.
 */
export const PREVIEW_TYPES: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  avif: 'image/avif',
  bmp: 'image/bmp',
  pdf: 'application/pdf',
};

/** previewType is the inline type of a file name, or undefined when it is not shown inline. */
export function previewType(name: string): string | undefined {
  const dot = name.lastIndexOf('.');
  return dot > 0 ? PREVIEW_TYPES[name.slice(dot + 1).toLowerCase()] : undefined;
}
