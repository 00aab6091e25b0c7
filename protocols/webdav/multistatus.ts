/**
 * A multistatus written as UTF-8 bytes straight into pieces of PIECE bytes, the form it is sent
 * in (issue 13). A folder's PROPFIND writes a response per entry: built as JavaScript strings, a
 * plain allprop response made about 1.6 KB of short-lived objects per entry (template strings,
 * their ropes, date and ETag text) and the pieces were encoded to UTF-8 once more. The young
 * generation then filled every few hundred entries while a page of entries was still alive, so
 * each page was copied by the collector and moved among the old objects: about a third of the CPU
 * of a 10,000-entry listing went to collections. Here the fixed text is copied from bytes made
 * once, numbers and dates are written digit by digit, and only the href is a string.
 */
import { MONTHS, utcOf, WEEKDAYS, httpDate, isoDate } from './http.ts';

/** PIECE is the size of the pieces a multistatus goes out in. */
export const PIECE = 64 * 1024;

const bytes = (s: string) => Buffer.from(s, 'latin1');
const WEEKDAY_BYTES = WEEKDAYS.map(bytes);
const MONTH_BYTES = MONTHS.map(bytes);
const DIGITS = '0123456789abcdefghijklmnopqrstuvwxyz';

/** Multistatus collects a multistatus's bytes; take() hands over the pieces filled so far. */
export class Multistatus {
  private piece: Buffer;
  private at = 0;
  private readonly filled: Buffer[] = [];

  /** `size` is the pieces' size: PIECE for a listing, less for one response. */
  constructor(private readonly size = PIECE) {
    this.piece = Buffer.allocUnsafe(size);
  }

  /** room makes sure the current piece has `n` more bytes free, starting a new one if not. */
  room(n: number): void {
    if (this.at + n <= this.piece.length) return;
    if (this.at > 0) this.filled.push(this.piece.subarray(0, this.at));
    this.piece = Buffer.allocUnsafe(Math.max(this.size, n));
    this.at = 0;
  }

  /** text writes any string as UTF-8 (room for it is made here). */
  text(s: string): void {
    this.room(s.length * 3);
    this.at += this.piece.write(s, this.at, 'utf8');
  }

  /** fixed copies bytes made once. */
  fixed(b: Buffer): void {
    this.room(b.length);
    this.piece.set(b, this.at);
    this.at += b.length;
  }

  /** ascii writes a string of ASCII characters only, one byte each. */
  ascii(s: string): void {
    this.room(s.length);
    const p = this.piece;
    let at = this.at;
    for (let i = 0; i < s.length; i++) p[at++] = s.charCodeAt(i);
    this.at = at;
  }

  /** int writes a whole number in base 10 or 36, as `n.toString(radix)` does. */
  int(n: number, radix = 10): void {
    if (!Number.isSafeInteger(n)) return this.ascii(n.toString(radix));
    this.room(17);
    const p = this.piece;
    if (n < 0) {
      p[this.at++] = 0x2d;
      n = -n;
    }
    let digits = 1;
    for (let rest = Math.floor(n / radix); rest > 0; rest = Math.floor(rest / radix)) digits++;
    let at = this.at + digits;
    this.at = at;
    do {
      const q = Math.floor(n / radix);
      p[--at] = DIGITS.charCodeAt(n - q * radix);
      n = q;
    } while (n > 0);
  }

  /** two writes a number below 100 as two digits. */
  private two(n: number): void {
    const tens = Math.floor(n / 10);
    this.piece[this.at++] = 0x30 + tens;
    this.piece[this.at++] = 0x30 + n - tens * 10;
  }

  /** httpDate writes httpDate(d), getlastmodified's form. */
  httpDate(d: Date): void {
    const t = utcOf(d.getTime());
    if (!t) return this.ascii(httpDate(d));
    this.room(29);
    this.fixed(WEEKDAY_BYTES[t.weekday]!);
    this.ascii(', ');
    this.two(t.day);
    this.piece[this.at++] = 0x20;
    this.fixed(MONTH_BYTES[t.month - 1]!);
    this.piece[this.at++] = 0x20;
    this.int(t.year);
    this.piece[this.at++] = 0x20;
    this.clock(t.hour, t.minute, t.second);
    this.ascii(' GMT');
  }

  /** isoDate writes isoDate(d), creationdate's form. */
  isoDate(d: Date): void {
    const t = utcOf(d.getTime());
    if (!t) return this.ascii(isoDate(d));
    this.room(20);
    this.int(t.year);
    this.piece[this.at++] = 0x2d;
    this.two(t.month);
    this.piece[this.at++] = 0x2d;
    this.two(t.day);
    this.piece[this.at++] = 0x54;
    this.clock(t.hour, t.minute, t.second);
    this.piece[this.at++] = 0x5a;
  }

  private clock(hour: number, minute: number, second: number): void {
    this.two(hour);
    this.piece[this.at++] = 0x3a;
    this.two(minute);
    this.piece[this.at++] = 0x3a;
    this.two(second);
  }

  /** ready tells whether a piece is filled (take() hands it over). */
  get ready(): boolean {
    return this.filled.length > 0;
  }

  /** take hands over the pieces filled so far (the one being written stays). */
  take(): Buffer[] {
    return this.filled.splice(0);
  }

  /** end hands over every remaining byte; the writer is not used after. */
  end(): Buffer[] {
    const out = this.take();
    if (this.at > 0) out.push(this.piece.subarray(0, this.at));
    this.at = 0;
    return out;
  }

  /** toString is the whole text written, for one response on its own (the writer is not used after). */
  toString(): string {
    return Buffer.concat(this.end()).toString('utf8');
  }
}
