import type { Command } from "commander";
import { detectAndRecord, fabricBlockers, fabricCheckFailed } from "../deploy/doctor.js";
import { recordedUp } from "../deploy/launch.js";
import { upInLane } from "../deploy/lane.js";
import { claimPlanNodes, DEFAULT_LEASE_MS } from "../deploy/claims.js";
import { deploymentKey, holdOrBusy, laneKey } from "../deploy/locks.js";
import { openSession } from "../deploy/session.js";
import { progressReporter } from "../deploy/progress.js";
import { parseDuration } from "./duration.js";
import { withInterrupts } from "./interrupts.js";
import { abortable } from "../deploy/abort.js";
import { loadCluster, openStore } from "./load.js";
import type { Output } from "./output.js";
import { planFromFlags, type PlanFlags } from "./plan.js";
import type { Plan } from "../plan/plan.js";
import type { ImageFacts } from "../engine/image-contract.js";
import { clusterOption, jsonOption, outputOption } from "./options.js";
import { decodeRestartPolicy } from "../deploy/contract.js";
import { UserError } from "../config/errors.js";

export interface UpFlags extends PlanFlags {
  timeout?: string;
  drain?: string;
  push?: boolean;
  json?: boolean;
  restart?: string;
}

export async function runUp(ref: string, flags: UpFlags, io: Output): Promise<void> {
  // From the first instant: a signal at any step (detection, locks, push, preflight, starts,
  // watch, swap) is heard, ends the command with 130/143/129 and rolls back what it started.
  await withInterrupts((signal) => launch(ref, flags, io, signal));
}

async function launch(ref: string, flags: UpFlags, io: Output, signal: AbortSignal): Promise<void> {
  const timeoutMs = parseDuration(flags.timeout ?? "60m", "--timeout");
  const drainMs = parseDuration(flags.drain ?? "2m", "--drain");
  const what = `launcher up ${ref}${flags.lane === undefined ? "" : ` --lane ${flags.lane}`}`;
  const now = (): Date => new Date();
  // Short leases are for tests that kill an `up`; the default suits real boots (README, "Two machines").
  const leaseMs = process.env.LAUNCHER_CLAIM_LEASE ? parseDuration(process.env.LAUNCHER_CLAIM_LEASE, "$LAUNCHER_CLAIM_LEASE") : DEFAULT_LEASE_MS;
  const cluster = loadCluster(flags.cluster);
  if (flags.restart !== undefined) {
    const d = decodeRestartPolicy(flags.restart);
    if (!d.ok) throw new UserError(`--restart ${d.problem}`, "pass --restart on-failure (restart the whole group each time it fails after it served) or --restart on-failure:N (at most N times); launcher serve does the restarting");
    flags = { ...flags, restartPolicy: d.policy };
  }
  // Planning first: a recipe error is reported before any node or lock is touched.
  const first = planFromFlags(ref, flags, io, cluster, "ignore");
  const store = openStore();
  const release: (() => void | Promise<void>)[] = [];
  try {
    if (flags.lane !== undefined) release.push(holdOrBusy(store, [laneKey(flags.lane)], what, now));
    // Each node's own fabric fills what the cluster file leaves out; the findings are checked once
    // the nodes are known (a lane picks its own).
    const probing = "while probing the nodes' fabric; nothing was started";
    const opened = await abortable(openSession(cluster), signal, probing);
    const detected = await abortable(detectAndRecord(opened, store, now().toISOString(), { peers: false }), signal, probing);
    // What earlier boots read of an image (entrypoint, engine version) is kept by image ID.
    const session = { ...detected.session, images: { get: (id: string) => store.imageFacts(id), put: (id: string, facts: ImageFacts) => store.saveImageFacts(id, facts, now().toISOString()) } };
    const findings = detected.report.findings;
    const progress = progressReporter(process.stderr, Date.now);
    // A claim taken over by another launcher (this one froze past its lease) stops the boot.
    const claimLost = new AbortController();
    const options = { timeoutMs, signal: AbortSignal.any([signal, claimLost.signal]), progress, push: flags.push !== false };
    const onLost = (message: string): void => {
      progress.note(message);
      claimLost.abort();
    };
    const claim = (plan: Plan) => claimPlanNodes(session, plan, { command: what, leaseMs, now, note: (t) => progress.note(t), onLost });
    let result;
    if (flags.lane === undefined) {
      const plan = planFromFlags(ref, flags, io, session.cluster, "error");
      const blocking = fabricBlockers(findings, plan.nodes.map((n) => n.node));
      if (blocking.length > 0) throw fabricCheckFailed(blocking);
      release.push(holdOrBusy(store, [deploymentKey(plan.cluster, plan.deployment)], what, now));
      const claims = await claim(plan);
      release.push(() => claims.release());
      io.err(`launcher: starting ${plan.deployment} (${plan.recipe.id}) on ${plan.nodes.map((n) => n.node).join(", ")}`);
      result = { ...(await recordedUp(plan, session, options, store, now)), deployment: plan.deployment };
    } else {
      const lane = flags.lane;
      io.err(`launcher: putting ${first.recipe.id} in lane ${lane}`);
      result = await upInLane(
        (nodes) => planFromFlags(ref, nodes === undefined ? flags : { ...flags, nodes: nodes.join(",") }, io, session.cluster, "error"),
        flags.nodes !== undefined,
        session,
        { ...options, lane, store, now, drainMs, what, claim, findings },
      );
    }
    if (flags.json) {
      io.json(result);
    } else if (result.status === "already-running") {
      io.out(`${result.deployment} is already running this recipe with these options: ${result.endpoint}/v1 (model "${result.served_model}"); nothing started`);
    } else {
      const laneText = flags.lane === undefined ? "" : `; lane ${flags.lane} serves it`;
      io.out(`${result.deployment} is ready in ${result.seconds.toFixed(1)} s: ${result.endpoint}/v1 (model "${result.served_model}")${laneText}`);
    }
  } finally {
    for (const r of release.reverse()) await r();
    store.close();
  }
}

export function registerUp(program: Command, io: Output): void {
  program
    .command("up")
    .description("launch a recipe on the cluster; wait until it serves; roll everything back on any failure")
    .argument("<recipe>", "recipe name, folder or recipe.toml")
    .addOption(clusterOption())
    .option("--lane <name>", "serving lane: a stable model name; swaps out what the lane served before")
    .option("--name <deployment>", "deployment name (default: the recipe name)")
    .option("--nodes <names>", "comma-separated nodes to use, head first (default: the first ones; in a lane, the first free ones)")
    .option("--port <port>", "API port on the head")
    .option("--timeout <duration>", "give up (and roll back) after this long", "60m")
    .option("--drain <duration>", "in a lane swap, how long the old deployment may finish running requests", "2m")
    .option("--restart <policy>", "on-failure[:N]: launcher serve recreates the whole group when it fails after it was ready (at most N times)")
    .option("--no-push", "fail instead of sending the image to nodes that lack it or hold another build")
    .addOption(jsonOption("print the result as JSON")).addOption(outputOption())
    .action((ref: string, opts: UpFlags) => runUp(ref, opts, io));
}
