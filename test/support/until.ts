/**
 * Resolves once `check` holds, looked at every 20 ms; rejects after `ms`, naming `what` and what
 * `context` says then (a log, a state). For conditions that nothing announces: a child's output, a
 * fake node's containers.
 */
export async function until(what: string, check: () => boolean, ms: number, context: () => string = () => ""): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}${context()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
