import bcrypt from 'bcrypt';

/** PASSWORD_MIN is the shortest password accepted; bcrypt reads at most PASSWORD_MAX_BYTES. */
export const PASSWORD_MIN = 8;
export const PASSWORD_MAX_BYTES = 72;

/** hashPassword hashes with bcrypt (native, off the event loop) at the configured cost. */
export function hashPassword(password: string, rounds: number): Promise<string> {
  return bcrypt.hash(password, rounds);
}

// Compared against when the user does not exist, so a wrong username costs as long as a wrong
// password and response times do not reveal which usernames exist. One per cost factor, made once.
const decoys = new Map<number, string>();
function decoy(rounds: number): string {
  let d = decoys.get(rounds);
  if (!d) decoys.set(rounds, (d = bcrypt.hashSync('decoy-password-never-matches', rounds)));
  return d;
}

/**
 * verifyPassword checks a password against a stored hash, or against a decoy of the same cost
 * (`rounds`) when there is no hash.
 */
export async function verifyPassword(password: string, hash: string | null, rounds = 10): Promise<boolean> {
  const ok = await bcrypt.compare(password, hash ?? decoy(rounds));
  return ok && hash !== null;
}
