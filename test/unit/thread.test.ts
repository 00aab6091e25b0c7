/**
 * The background thread (src/thread.ts) that hashing and SQLite's checkpoints share: each user's
 * replies come back to it alone, whatever else the thread is doing, and a thread that dies tells
 * every user at once instead of leaving them waiting.
 */
import { expect } from 'chai';
import { BackgroundThread, type Listener } from '../../src/thread.ts';

// Handlers as thread.ts takes them: a function of `require` that returns `(message, reply) =>`.
const ECHO = `(require) => (m, reply) => reply({ echo: m.n, by: 'echo' })`;
const SQUARE = `(require) => {
  const seen = [];
  return (m, reply) => {
    seen.push(m.n);
    reply({ square: m.n * m.n, seen: seen.length });
  };
}`;
const EXIT = `(require) => (m) => process.exit(m.code)`;

/** collect opens a channel whose replies gather in `got`; `gone` settles when the thread dies. */
function collect(thread: BackgroundThread, name: string, source: string) {
  const got: unknown[] = [];
  let died: (err: Error) => void = () => undefined;
  const gone = new Promise<Error>((resolve) => (died = resolve));
  const listener: Listener = { message: (m) => got.push(m), exit: (err) => died(err) };
  return { got, gone, channel: thread.open(name, source, listener) };
}

const until = async (done: () => boolean) => {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 10));
};

describe('background thread', () => {
  // Threads made here end with their test (the handler EXIT), not with the test run.
  const made: BackgroundThread[] = [];
  const fresh = () => {
    const t = new BackgroundThread();
    made.push(t);
    return t;
  };
  afterEach(async () => {
    for (const t of made.splice(0)) {
      if (t.dead) continue;
      const end = collect(t, 'exit', EXIT);
      end.channel.post({ code: 0 });
      await end.gone;
    }
  });

  it('gives each channel its own replies, in order, with two handlers and two channels of one', async () => {
    const thread = fresh();
    const echo = collect(thread, 'echo', ECHO);
    const a = collect(thread, 'square', SQUARE);
    const b = collect(thread, 'square', SQUARE);
    for (let n = 1; n <= 50; n++) {
      echo.channel.post({ n });
      (n % 2 ? a : b).channel.post({ n });
    }
    await until(() => echo.got.length === 50 && a.got.length + b.got.length === 50);
    expect(echo.got).to.deep.equal(Array.from({ length: 50 }, (_, i) => ({ echo: i + 1, by: 'echo' })));
    // One handler instance serves both channels (its state counts all 50); replies stay apart.
    expect(a.got.map((m) => (m as { square: number }).square)).to.deep.equal(
      Array.from({ length: 25 }, (_, i) => (2 * i + 1) ** 2),
    );
    expect(b.got.map((m) => (m as { square: number }).square)).to.deep.equal(
      Array.from({ length: 25 }, (_, i) => (2 * i + 2) ** 2),
    );
    expect(Math.max(...[...a.got, ...b.got].map((m) => (m as { seen: number }).seen))).to.equal(50);
  });

  it('a closed channel hears nothing more; the others go on', async () => {
    const thread = fresh();
    const a = collect(thread, 'echo', ECHO);
    const b = collect(thread, 'echo', ECHO);
    a.channel.post({ n: 1 });
    a.channel.close();
    b.channel.post({ n: 2 });
    await until(() => b.got.length === 1);
    await new Promise((r) => setTimeout(r, 50));
    expect(a.got).to.deep.equal([]);
    expect(b.got).to.deep.equal([{ echo: 2, by: 'echo' }]);
  });

  it('a thread that dies tells every channel, and a channel opened on it afterwards at once', async () => {
    const thread = fresh();
    const a = collect(thread, 'echo', ECHO);
    const b = collect(thread, 'exit', EXIT);
    b.channel.post({ code: 3 });
    const [ea, eb] = await Promise.all([a.gone, b.gone]);
    expect(ea.message).to.match(/exited with code 3/);
    expect(eb).to.equal(ea);
    expect(thread.dead).to.equal(ea);
    const late = collect(thread, 'echo', ECHO);
    expect((await late.gone).message).to.match(/exited with code 3/);
    // Posting to a dead thread is a no-op, not a throw.
    late.channel.post({ n: 1 });
  });

  it('the shared thread is one for the process', () => {
    expect(BackgroundThread.shared()).to.equal(BackgroundThread.shared());
  });
});
