/**
 * The idle timeout as the page sees it: the server ends a session after idle_timeout_seconds
 * without a request. The page counts from its own last request and, once that time has passed,
 * asks the server; if the session has ended it shows the sign-in with a sentence saying why
 * (rather than waiting for the user's next click to fail). Another tab's requests keep the session
 * alive, and the check then finds it so and waits again.
 */
import { useEffect } from 'preact/hooks';
import { ApiError, lastRequestAt, request } from './api.ts';

/** duration says a number of seconds as a person would: "15 minutes", "2 hours", "30 seconds". */
export function duration(seconds: number): string {
  const unit = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  if (seconds < 90) return unit(Math.round(seconds), 'second');
  if (seconds < 90 * 60) return unit(Math.round(seconds / 60), 'minute');
  return unit(Math.round(seconds / 3600), 'hour');
}

/** useIdleSignOut calls `signedOut` with the reason once the server has ended an idle session. */
export function useIdleSignOut(seconds: number | undefined, signedOut: (message: string) => void): void {
  useEffect(() => {
    if (!seconds) return;
    let timer = 0;
    const arm = () => {
      // A second's slack: the server's clock for the session starts at our request's arrival.
      const due = lastRequestAt + seconds * 1000 + 1000 - Date.now();
      timer = window.setTimeout(check, Math.max(due, 1000));
    };
    const check = async () => {
      if (Date.now() < lastRequestAt + seconds * 1000) return arm();
      try {
        await request('GET', '/web/session');
        arm();
      } catch (err) {
        if (err instanceof ApiError && err.status === 401)
          signedOut(
            `You were signed out after ${duration(seconds)} without activity. Sign in again to go on.`,
          );
        else arm();
      }
    };
    arm();
    return () => window.clearTimeout(timer);
  }, [seconds]);
}
