import assert from "node:assert/strict";
import { RemoteError, UserError } from "../../src/config/errors.js";
import { FakeCluster, type FakeClusterOptions } from "./fake-cluster.js";

// What the decision tests over a FakeCluster share: a cluster closed whatever the test did, and a
// refusal checked as the error funnel would print it.

/** Everything an error says: message, detail and hint, as the error funnel prints them. */
export const said = (e: unknown): string => (e instanceof RemoteError ? `${e.node}: ${e.message}\n${e.detail ?? ""}\n${e.hint ?? ""}` : e instanceof UserError ? `${e.message}\n${e.hint ?? ""}` : String(e));

export async function withCluster(options: FakeClusterOptions, body: (fc: FakeCluster) => Promise<void>): Promise<void> {
  const fc = await FakeCluster.start(options);
  try {
    await body(fc);
  } finally {
    await fc.close();
  }
}

/** Rejects with a UserError or RemoteError (never a stack-only Error) whose words match every pattern. */
export async function refused(p: Promise<unknown>, kind: typeof UserError | typeof RemoteError, ...patterns: RegExp[]): Promise<string> {
  let text = "";
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof kind, `not a ${kind.name}: ${String(e)}`);
    text = said(e);
    return true;
  });
  for (const p of patterns) assert.match(text, p);
  return text;
}
