/**
 * Runs the branches of one transfer (the chain, the relay) at once under one abort: the first
 * failure aborts the others (their SSH sessions are killed) and every branch is awaited before
 * that failure is thrown, so nothing streams on after the error is reported, and a retry (the
 * daemon's restart, the next `up`) does not race a leftover writing the same partial file.
 * `signal` (the user's interrupt) aborts them all the same way.
 */
export async function together(signal: AbortSignal | undefined, branches: readonly ((signal: AbortSignal) => Promise<unknown>)[]): Promise<void> {
  const local = new AbortController();
  const forward = (): void => local.abort(signal?.reason);
  signal?.addEventListener("abort", forward, { once: true });
  if (signal?.aborted) forward();
  let first: { error: unknown } | undefined;
  try {
    await Promise.allSettled(
      branches.map(async (branch) => {
        try {
          await branch(local.signal);
        } catch (error) {
          // The first failure is the cause; the others are mostly "stopped" answers to the abort.
          first ??= { error };
          local.abort(error);
        }
      }),
    );
  } finally {
    signal?.removeEventListener("abort", forward);
  }
  if (first !== undefined) throw first.error;
}
