/** Runs `fn` with an AbortSignal that Ctrl-C and SIGTERM trigger, so that work in flight can roll back. */
export async function withInterrupts<T>(fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  // SIGHUP too: a dropped SSH session to this machine must roll back, not leave a half boot.
  const onSignal = (sig: NodeJS.Signals): void => {
    process.exitCode = sig === "SIGINT" ? 130 : sig === "SIGHUP" ? 129 : 143;
    controller.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  process.on("SIGHUP", onSignal);
  try {
    return await fn(controller.signal);
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    process.off("SIGHUP", onSignal);
  }
}
