/** MOVE (RFC 4918 §9.9): COPY's rules with Depth infinity only; locks on the source go with it. */
import { relocate } from './copy.ts';

/** move answers MOVE. */
export const move = relocate('move');
