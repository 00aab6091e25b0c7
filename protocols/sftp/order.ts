/**
 * The ordering rule of an SFTP session. A client may send many requests without waiting (sshfs
 * sends OPEN(create) and LSTAT of one path back to back; an append's OPEN follows the CLOSE of the
 * write before it), and SFTP lets the server answer in any order — but the outcome must be the one
 * the client meant: the order it sent them in. So a request takes effect only after every earlier
 * request of the session that it could disagree with:
 *
 * - each request names the paths it touches (a handle's request touches the handle's path) and
 *   whether it changes them;
 * - two requests conflict when at least one changes something and their paths overlap: the same
 *   path, or one inside the other (a folder and what is in it, so creating `a/x` orders with a
 *   listing or rename of `a`);
 * - requests that only read never wait for each other, and unrelated paths run side by side, so
 *   a mount's parallel lookups and the pipelined READs and WRITEs of a transfer keep their speed
 *   (requests on one handle are additionally kept in order by the handle's own queue).
 *
 * Waits only ever point to earlier requests, so they cannot deadlock.
 */

/** Touch is what one request touches: site-relative paths ('' is the root) and whether it changes them. */
export interface Touch {
  paths: string[];
  change: boolean;
  /**
   * the handle the request is on: requests on one handle are already kept in order by the
   * handle's queue, so they need not wait for each other here (a transfer's 64 pipelined WRITEs
   * would otherwise each wait on all the others)
   */
  owner?: object;
}

interface Active extends Touch {
  done: Promise<void>;
}

/** overlaps tells whether two paths are the same or one is inside the other. */
export function overlaps(a: string, b: string): boolean {
  if (a === b || a === '' || b === '') return true;
  return a.length < b.length ? b.startsWith(`${a}/`) : a.startsWith(`${b}/`);
}

function conflict(a: Touch, b: Touch): boolean {
  if (!a.change && !b.change) return false;
  return a.paths.some((p) => b.paths.some((q) => overlaps(p, q)));
}

/** RequestOrder admits one session's requests in arrival order (see the rule above). */
export class RequestOrder {
  private readonly active = new Set<Active>();

  /**
   * admit must be called when the request arrives, before any await: it registers the request and
   * returns a promise that resolves once every earlier conflicting request has finished, plus the
   * function to call when this one has finished (answered).
   */
  admit(touch: Touch): { ready: Promise<void>; finish: () => void } {
    if (touch.paths.length === 0) return { ready: Promise.resolve(), finish: () => undefined };
    const before: Promise<void>[] = [];
    for (const a of this.active)
      if (!(touch.owner && a.owner === touch.owner) && conflict(a, touch)) before.push(a.done);
    let finish!: () => void;
    const entry: Active = { ...touch, done: new Promise<void>((resolve) => (finish = resolve)) };
    this.active.add(entry);
    const ready =
      before.length === 0
        ? Promise.resolve()
        : before.length === 1
          ? before[0]!
          : Promise.all(before).then(() => undefined);
    return {
      ready,
      finish: () => {
        this.active.delete(entry);
        finish();
      },
    };
  }
}
