/**
 * Runs `items` with at most `concurrency` in flight, results in the items' order. After an item
 * failed no new one starts, and the first failure is thrown once the items already running have
 * ended (none is left running behind the caller's back). An aborted `signal` is thrown at once:
 * stopping what runs is then the work of the items' own abort handlers.
 */
export async function inPool<T, R>(items: readonly T[], concurrency: number, signal: AbortSignal | undefined, run: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (next < items.length && failure === undefined) {
      try {
        signal?.throwIfAborted();
        const i = next++;
        results[i] = await run(items[i] as T);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  const workers = Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker));
  if (signal === undefined) await workers;
  else {
    let onAbort = (): void => undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason);
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    });
    try {
      await Promise.race([workers, aborted]);
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }
  if (failure !== undefined) throw failure.error;
  return results;
}
