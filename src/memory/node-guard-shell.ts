import { RemoteError } from "../config/errors.js";
import { execChecked, outputTail, UnreachableError, unreachable, type Transport } from "../remote/transport.js";
import { randomBytes } from "node:crypto";
import { guardableName, guardReadBound, lastTrip, NODE_GUARD_READ_SCRIPT, nodeGuardLookArgv, nodeGuardStartArgv, nodeGuardStopArgv, parseNodeGuardReport, splitLookedGuards, splitStoppedReports, type NodeGuardEvent } from "./node-guard.js";

// The start and the removal are each one short command: bounded well below a boot's patience.
const NODE_GUARD_EXEC_MS = 20_000;

/**
 * Starts `deployment`'s guard on the transport's node (src/memory/node-guard.ts): one SSH round
 * trip; the guard then runs on its own. Throws the transport's RemoteError when it could not, its
 * message ending in the start script's own last word on why (a node without setsid(1)).
 */
export async function startNodeGuard(transport: Transport, deployment: string, floorGiB: number, launch?: string): Promise<void> {
  try {
    await execChecked(transport, nodeGuardStartArgv(deployment, floorGiB, launch), "starting the node guard", NODE_GUARD_EXEC_MS);
  } catch (e) {
    const said = e instanceof RemoteError && !(e instanceof UnreachableError) ? e.detail?.trim().split("\n").at(-1) : undefined;
    throw e instanceof RemoteError && said ? new RemoteError(e.node, `${e.message}: ${said}`, e.detail) : e;
  }
}

/**
 * Ends and removes the guards of `deployments` on the transport's node, in one round trip: what
 * each one's report said, parsed (untrusted), by deployment. A guard that cannot be reached now
 * ends by itself once its deployment's containers are gone from its node.
 */
export async function stopNodeGuards(transport: Transport, deployments: readonly string[]): Promise<Map<string, NodeGuardEvent[]>> {
  const argv = nodeGuardStopArgv(deployments);
  if (argv === undefined) return new Map();
  // The node's answer is read bounded: each report's tail and its name line, no more.
  const r = await transport.exec(argv, { timeoutMs: NODE_GUARD_EXEC_MS, maxChars: guardReadBound(argv.length - 4) });
  if (r.code !== 0) throw unreachable(transport, r) ?? new RemoteError(transport.node, `removing the node guard failed (exit ${r.code})`, outputTail(r));
  return new Map([...splitStoppedReports(r.stdout, deployments)].map(([name, text]) => [name, parseNodeGuardReport(text)]));
}

/** How long a boot that failed waits for a node's report: a node that does not answer soon says nothing. */
const NODE_GUARD_READ_MS = 3000;

/**
 * The trip of `deployment`'s guard on the transport's node, when the guard started last tripped:
 * one bounded read of its report, parsed as untrusted input. Undefined when it did not, or the
 * node did not answer in time.
 */
export async function nodeGuardTrip(transport: Transport, deployment: string): Promise<Extract<NodeGuardEvent, { kind: "tripped" }> | undefined> {
  if (!guardableName(deployment)) return undefined;
  const r = await transport.exec(["sh", "-c", NODE_GUARD_READ_SCRIPT, "sh", deployment], { timeoutMs: NODE_GUARD_READ_MS, maxChars: guardReadBound(1) });
  return r.code === 0 ? lastTrip(parseNodeGuardReport(r.stdout)) : undefined;
}

/**
 * The heartbeat and report of each named deployment's guard on the transport's node, in one
 * bounded read, parsed as untrusted input (names that are no deployment name are not asked for;
 * the name lines carry a nonce of this read, so that no report line passes for one). Undefined
 * when the node did not answer, or not in time; `signal` ends the read.
 */
export async function lookNodeGuards(transport: Transport, deployments: readonly string[], signal?: AbortSignal): Promise<ReturnType<typeof splitLookedGuards> | undefined> {
  const nonce = randomBytes(8).toString("hex");
  const argv = nodeGuardLookArgv(nonce, deployments);
  if (argv === undefined) return new Map();
  const names = argv.slice(5);
  const r = await transport.exec(argv, { timeoutMs: NODE_GUARD_READ_MS, maxChars: guardReadBound(names.length), ...(signal === undefined ? {} : { signal }) });
  return r.code === 0 ? splitLookedGuards(r.stdout, names, nonce) : undefined;
}
