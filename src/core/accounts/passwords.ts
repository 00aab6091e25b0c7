import bcrypt from 'bcrypt';

/** PASSWORD_MIN is the shortest password accepted; bcrypt reads at most PASSWORD_MAX_BYTES. */
export const PASSWORD_MIN = 8;
export const PASSWORD_MAX_BYTES = 72;

/** hashPassword hashes with bcrypt (native, off the event loop) at the configured cost. */
export function hashPassword(password: string, rounds: number): Promise<string> {
  return bcrypt.hash(password, rounds);
}

// Compared against when the user does not exist, so a wrong username costs as long as a wrong
// password and response times do not reveal which usernames exist.
const decoy = bcrypt.hashSync('decoy-password-never-matches', 10);

/** verifyPassword checks a password against a stored hash (or the decoy when there is none). */
export async function verifyPassword(password: string, hash: string | null): Promise<boolean> {
  const ok = await bcrypt.compare(password, hash ?? decoy);
  return ok && hash !== null;
}
