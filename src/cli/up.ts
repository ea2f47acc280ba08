import type { Command } from "commander";
import { openSession } from "../deploy/session.js";
import { progressReporter } from "../deploy/progress.js";
import { up } from "../deploy/up.js";
import { parseDuration } from "./duration.js";
import { loadCluster } from "./load.js";
import type { Output } from "./output.js";
import { planFromFlags, type PlanFlags } from "./plan.js";

export interface UpFlags extends PlanFlags {
  timeout?: string;
  json?: boolean;
}

/** Runs `fn` with an AbortSignal that Ctrl-C and SIGTERM trigger, so that work in flight can roll back. */
export async function withInterrupts<T>(fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const onSignal = (sig: NodeJS.Signals): void => {
    process.exitCode = sig === "SIGINT" ? 130 : 143;
    controller.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    return await fn(controller.signal);
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

export async function runUp(ref: string, flags: UpFlags, io: Output): Promise<void> {
  const timeoutMs = parseDuration(flags.timeout ?? "60m", "--timeout");
  const session = await openSession(loadCluster(flags.cluster));
  const plan = planFromFlags(ref, flags, io, session.cluster);
  io.err(`launcher: starting ${plan.deployment} (${plan.recipe.id}) on ${plan.nodes.map((n) => n.node).join(", ")}`);
  const result = await withInterrupts((signal) => up(plan, session, { timeoutMs, signal, progress: progressReporter(process.stderr, Date.now) }));
  if (flags.json) {
    io.json({ deployment: plan.deployment, ...result });
  } else if (result.status === "already-running") {
    io.out(`${plan.deployment} is already running this recipe: ${result.endpoint}/v1 (model "${result.served_model}"); nothing started`);
  } else {
    io.out(`${plan.deployment} is ready in ${result.seconds.toFixed(1)} s: ${result.endpoint}/v1 (model "${result.served_model}")`);
  }
}

export function registerUp(program: Command, io: Output): void {
  program
    .command("up")
    .description("launch a recipe on the cluster; wait until it serves; roll everything back on any failure")
    .argument("<recipe>", "recipe name, folder or recipe.toml")
    .option("--cluster <file>", "cluster file (default: $LAUNCHER_CLUSTER or ./cluster.toml)")
    .option("--lane <name>", "serving lane")
    .option("--name <deployment>", "deployment name (default: the lane, else the recipe name)")
    .option("--port <port>", "API port on the head")
    .option("--timeout <duration>", "give up (and roll back) after this long", "60m")
    .option("--json", "print the result as JSON")
    .action((ref: string, opts: UpFlags) => runUp(ref, opts, io));
}
