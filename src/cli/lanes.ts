import type { Command } from "commander";
import type { Output } from "../app/output.js";
import { clusterOption, jsonOption, outputOption, parseCount } from "./options.js";

export function registerLanes(program: Command, io: Output): void {
  program
    .command("lanes")
    .description("each lane: what it serves, since when, its last swaps (and what the nodes run, with a cluster file)")
    .addOption(clusterOption())
    .option("--swaps <n>", "how many past swaps to show per lane", "5")
    .addOption(jsonOption("print as JSON")).addOption(outputOption())
    .action(async (opts: { cluster?: string; swaps: string; json?: boolean }) => {
      // Loaded here, not above: `lanes --help` and every other command start without them.
      const [{ clusterStatus }, { openSession }, { loadCluster, optionalClusterPath }, { withStore }] = await Promise.all([import("../nodes/status.js"), import("../nodes/session.js"), import("../app/this-process.js"), import("../app/host.js")]);
      await withStore(async (store) => {
        const limit = parseCount(opts.swaps, "--swaps");
        // The nodes are the truth: with a cluster at hand, say what really runs in each lane.
        const file = optionalClusterPath(opts.cluster);
        const live = file === undefined ? undefined : await clusterStatus(await openSession(loadCluster(file)), new Date());
        const names = new Set([...store.lanes().map((l) => l.name), ...(live?.deployments.flatMap((d) => (d.lane === undefined ? [] : [d.lane])) ?? [])]);
        const lanes = [...names].sort().map((name) => {
          const rec = store.lane(name);
          const running = live?.deployments.filter((d) => d.lane === name).map((d) => ({ deployment: d.deployment, recipe: d.recipe, status: d.status, phase: d.phase, nodes: d.ranks.map((r) => r.node) }));
          return {
            lane: name,
            state: rec?.state ?? "unknown",
            ...(rec?.deployment === undefined ? {} : { deployment: rec.deployment }),
            ...(rec?.recipe === undefined ? {} : { recipe: rec.recipe }),
            ...(rec?.served_model === undefined ? {} : { served_model: rec.served_model }),
            ...(rec?.switching_to === undefined ? {} : { switching_to: rec.switching_to }),
            ...(rec === undefined ? {} : { since: rec.since }),
            ...(running === undefined ? {} : { running }),
            swaps: store.swaps(name, limit),
          };
        });
        if (opts.json) {
          io.json({ lanes });
          return;
        }
        if (lanes.length === 0) io.out("no lanes (launcher up RECIPE --lane NAME makes one)");
        for (const l of lanes) {
          const what = l.state === "switching" ? `switching to ${l.switching_to ?? "?"}` : l.deployment === undefined ? l.state : `${l.state}: ${l.deployment} (recipe ${l.recipe ?? "?"}, model ${l.served_model ?? "?"})`;
          io.out(`${l.lane}  ${what}${l.since === undefined ? "" : `  since ${l.since}`}`);
          if (l.running !== undefined) {
            if (l.running.length === 0) io.out("  on the nodes: nothing runs in this lane");
            for (const r of l.running) io.out(`  on the nodes: ${r.deployment} ${r.status} (${r.phase}) on ${r.nodes.join(", ")}`);
          }
          for (const s of l.swaps) {
            const took = s.ended_at === undefined ? "" : ` in ${((Date.parse(s.ended_at) - Date.parse(s.started_at)) / 1000).toFixed(1)} s`;
            io.out(`  ${s.started_at}  ${s.from_deployment ?? "(empty)"} -> ${s.to_deployment}  ${s.mode}  ${s.outcome}${took}${s.error === undefined ? "" : `: ${s.error.split("\n")[0]}`}`);
          }
        }
      });
    });
}
