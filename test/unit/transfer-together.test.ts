import assert from "node:assert/strict";
import { test } from "node:test";
import { together } from "../../src/transfer/together.js";

/** A branch that streams until aborted, then takes a while to stop (an SSH session being killed). */
const streaming = (log: string[]) => (signal: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    const stopped = (): void => {
      setTimeout(() => {
        log.push("relay stopped");
        reject(new Error("relay: stopped"));
      }, 50);
    };
    if (signal.aborted) stopped();
    else signal.addEventListener("abort", stopped, { once: true });
    void resolve;
  });

test("when the chain fails, the relay still streaming is aborted and awaited before the chain's error is thrown", async () => {
  const log: string[] = [];
  const chain = async (): Promise<void> => {
    await new Promise((r) => setTimeout(r, 10));
    throw new Error("chain: b took 10 of 20 bytes");
  };
  await assert.rejects(
    together(undefined, [chain, streaming(log)]).finally(() => log.push("reported")),
    /chain: b took 10 of 20 bytes/,
  );
  assert.deepEqual(log, ["relay stopped", "reported"]);
});

test("the user's interrupt aborts every branch, and all are awaited", async () => {
  const log: string[] = [];
  const user = new AbortController();
  const done = together(user.signal, [streaming(log), streaming(log)]).finally(() => log.push("reported"));
  user.abort();
  await assert.rejects(done, /relay: stopped/);
  assert.deepEqual(log, ["relay stopped", "relay stopped", "reported"]);
});

test("branches that succeed give no error", async () => {
  await together(undefined, [async () => 1, async () => 2]);
});
