import { distance } from "fastest-levenshtein";

/** The known name closest to a misspelt one, when it is close enough to be a plausible typo. */
export function nearest(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const d = distance(name, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  const limit = Math.max(2, Math.floor(name.length / 3));
  return bestDistance <= limit ? best : undefined;
}
