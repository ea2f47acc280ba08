import type { Command } from "commander";
import { describeFigures } from "../engine/boot-log.js";
import type { BootRecord, MemoryTripRecord, NodeOutageRecord } from "../store/store.js";
import { ranText } from "../nodes/outage.js";
import { describeSample } from "../memory/memory-watch.js";
import { nodeGuardTripWords, type NodeGuardTripRecord } from "../contract/node-guard-trip.js";
import { outageCauseWords } from "../contract/outage.js";
import { withStore } from "../app/host.js";
import type { Output } from "../app/output.js";
import { jsonOption, outputOption, parseCount } from "./options.js";

const seconds = (from: string, to: string | undefined): number | undefined => (to === undefined ? undefined : (Date.parse(to) - Date.parse(from)) / 1000);

/** How long the head spent in each phase; serving is where the boot ends, so it is not a step. */
export function headPhases(boot: BootRecord): { phase: string; seconds?: number; figures: Readonly<Record<string, string>> }[] {
  const head = boot.nodes[0];
  let before: Readonly<Record<string, string>> = {};
  return boot.phases
    .filter((p) => p.node === head && p.phase !== "serving")
    .map((p) => {
      const s = seconds(p.started_at, p.ended_at);
      // Figures accumulate over a boot: each phase shows the ones it found.
      const found = Object.fromEntries(Object.entries(p.figures).filter(([k, v]) => before[k] !== v));
      before = p.figures;
      return { phase: p.phase, ...(s === undefined ? {} : { seconds: s }), figures: found };
    });
}

/**
 * Each node's peak use over the boot: the least available memory the guard saw on it, and the
 * phase it was seen in (`describeSample`'s wording). Nodes the guard never sampled are left out.
 */
export function memoryPeaks(boot: BootRecord): string[] {
  return boot.nodes.flatMap((node) => {
    const worst = boot.phases
      .filter((p) => p.node === node && p.min_available_kib !== undefined && p.total_kib !== undefined)
      .sort((a, b) => (a.min_available_kib as number) - (b.min_available_kib as number))[0];
    if (worst === undefined) return [];
    return [`${node} ${describeSample({ availableKiB: worst.min_available_kib as number, totalKiB: worst.total_kib as number })} (${worst.phase})`];
  });
}

/** The memory guard's trips after ready (launcher serve), newest first: when, where, what it said. */
export function tripLines(trips: readonly MemoryTripRecord[]): string[] {
  if (trips.length === 0) return [];
  return ["memory guard trips after ready (launcher serve):", ...trips.map((t) => `${t.at}  ${t.deployment}: ${t.message}`)];
}

/** Nodes that stopped answering while launcher's ranks ran there (launcher serve), newest first. */
export function outageHistoryLines(outages: readonly NodeOutageRecord[]): string[] {
  if (outages.length === 0) return [];
  return [
    "node outages (launcher serve):",
    ...outages.map((o) => {
      const lasted = o.ended_at === undefined ? "still out (or its daemon stopped before it answered)" : `answered again at ${o.ended_at}, after ${Math.round((Date.parse(o.ended_at) - Date.parse(o.since)) / 1000)} s`;
      const memory = o.memory === undefined ? "" : `, last seen with ${describeSample(o.memory)}`;
      const cause = o.ended_at === undefined || o.cause === undefined ? "" : `; ${outageCauseWords(o.cause, o.kind)}`;
      return `${o.since}  ${o.cluster}/${o.node} ${o.kind}: ${lasted}; it ran ${ranText(o.deployments)}${memory}${cause}`;
    }),
  ];
}

/** The nodes' own guards' trips the daemon read, newest first: what it said, and what it did on the other nodes. */
export function guardTripHistoryLines(trips: readonly NodeGuardTripRecord[]): string[] {
  if (trips.length === 0) return [];
  return ["node guard trips (read by launcher serve):", ...trips.map((t) => `${t.at}  ${t.cluster}/${t.deployment}: ${nodeGuardTripWords(t)}`)];
}

/** `history --json`'s node_outages: the records, keys snake_case. */
const outageJson = ({ memory, ...o }: NodeOutageRecord): object => ({ ...o, ...(memory === undefined ? {} : { memory: { available_kib: memory.availableKiB, total_kib: memory.totalKiB, at: memory.at } }) });

export function registerHistory(program: Command, io: Output): void {
  program
    .command("history")
    .description("past boots, newest first, and how long each phase took")
    .argument("[recipe]", "only the boots of this recipe")
    .option("--limit <n>", "how many boots", "20")
    .addOption(jsonOption("print as JSON")).addOption(outputOption())
    .action((recipe: string | undefined, opts: { limit: string; json?: boolean }) =>
      withStore((store) => {
        const limit = parseCount(opts.limit, "--limit", 1);
        const boots = store.history(recipe, limit);
        // The supervisor's restarts (launcher serve, up --restart): of the deployments these boots ran.
        const deployments = new Set(boots.map((b) => b.deployment));
        const restarts = store.restarts(undefined, limit).filter((r) => recipe === undefined || deployments.has(r.deployment));
        // Of the deployments these boots ran: killed after ready by the daemon's guard.
        const ran = new Map(boots.map((b) => [`${b.cluster}/${b.deployment}`, b] as const));
        const trips = [...ran.values()].flatMap((b) => store.memoryTrips(b.cluster, b.deployment, limit)).sort((a, b) => b.at.localeCompare(a.at)).slice(0, limit);
        // With a recipe named: the outages of the nodes its deployments ran on.
        const outages = store.outages(undefined, limit).filter((o) => recipe === undefined || o.deployments.some((d) => deployments.has(d.deployment)));
        const guardTrips = store.nodeGuardTrips(undefined, undefined, limit).filter((t) => recipe === undefined || deployments.has(t.deployment));
        if (opts.json) {
          io.json({ boots: boots.map((b) => ({ ...b, seconds: seconds(b.started_at, b.ended_at), head_phases: headPhases(b) })), restarts, memory_trips: trips, node_outages: outages.map(outageJson), node_guard_trips: guardTrips });
          return;
        }
        if (boots.length === 0) io.out(`no boots recorded${recipe === undefined ? "" : ` for ${recipe}`}`);
        for (const b of boots) {
          const total = seconds(b.started_at, b.ended_at);
          const outcome = b.outcome === "booting" ? "still booting (or its launcher was killed)" : `${b.outcome}${total === undefined ? "" : ` after ${total.toFixed(1)} s`}`;
          const engine = b.engine_version === undefined ? "" : `  engine ${b.engine_version}`;
          io.out(`${b.started_at}  ${b.recipe} (${b.recipe_hash})  ${outcome}  on ${b.nodes.join(", ")}${b.lane === undefined ? "" : `  lane ${b.lane}`}${engine}`);
          const steps = headPhases(b).map((p) => {
            const figures = describeFigures(p.figures);
            return `${p.phase} ${p.seconds === undefined ? "?" : `${p.seconds.toFixed(1)} s`}${figures ? ` (${figures})` : ""}`;
          });
          if (steps.length > 0) io.out(`    ${steps.join(" -> ")}`);
          const peaks = memoryPeaks(b);
          if (peaks.length > 0) io.out(`    least memory available: ${peaks.join(", ")}`);
          if (b.error !== undefined) io.out(`    failed on ${b.failed_node ?? "?"}: ${b.error}`);
        }
        if (restarts.length > 0) io.out("restarts (launcher serve, up --restart):");
        for (const r of restarts) {
          const outcome = r.outcome === "restarting" ? "still restarting (or its daemon was killed)" : r.outcome;
          io.out(`${r.started_at}  ${r.deployment} restart ${r.attempt}: ${r.message}  ${outcome}${r.error === undefined ? "" : `: ${r.error.split("\n")[0] ?? ""}`}`);
          if (r.cause !== undefined) io.out(`    cause: ${r.cause}`);
        }
        for (const line of tripLines(trips)) io.out(line);
        for (const line of outageHistoryLines(outages)) io.out(line);
        for (const line of guardTripHistoryLines(guardTrips)) io.out(line);
      }),
    );
}
