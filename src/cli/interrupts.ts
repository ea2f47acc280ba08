import { Interrupted } from "../config/abort.js";

export const EXIT_CODES: Readonly<Record<string, number>> = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 };

/**
 * Runs `fn` with an AbortSignal that Ctrl-C, SIGTERM and SIGHUP trigger, so that work in flight
 * can roll back. The signal's reason is an `Interrupted` naming the signal; the exit status is
 * 128 + the signal's number, whatever `fn` then throws.
 */
export async function withInterrupts<T>(fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  // SIGHUP too: a dropped SSH session to this machine must roll back, not leave a half boot.
  const onSignal = (sig: NodeJS.Signals): void => {
    process.exitCode = EXIT_CODES[sig] ?? 143;
    controller.abort(new Interrupted(sig));
  };
  for (const sig of Object.keys(EXIT_CODES)) process.on(sig, onSignal);
  try {
    return await fn(controller.signal);
  } finally {
    for (const sig of Object.keys(EXIT_CODES)) process.off(sig, onSignal);
  }
}
