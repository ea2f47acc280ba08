import type { Command } from "commander";
import { EXIT_USER, UserError } from "../config/errors.js";
import { splitTimestamp } from "../engine/boot-log.js";
import { listNodes, targetDeployments } from "../deploy/labels.js";
import { openSession } from "../deploy/session.js";
import { redactText } from "../config/redact.js";
import { loadCluster, openStore } from "./load.js";
import type { Output } from "./output.js";
import { withInterrupts } from "./interrupts.js";

export function registerLogs(program: Command, io: Output): void {
  program
    .command("logs")
    .description("the logs of a deployment, node-prefixed, merged in time order")
    .argument("<target>", "deployment, lane or recipe name (deployment/NAME, lane/NAME, recipe/NAME when a name fits several)")
    .option("--node <name>", "only this node")
    .option("--follow", "keep printing new lines")
    .option("--tail <n>", "last N lines per node", "200")
    .option("--cluster <file>", "cluster file (default: $LAUNCHER_CLUSTER or ./cluster.toml)")
    .action(async (target: string, opts: { node?: string; follow?: boolean; tail: string; cluster?: string }) => {
      const tail = Number(opts.tail);
      if (!Number.isInteger(tail) || tail < 0) throw new UserError(`--tail ${opts.tail} is not a number of lines`);
      const session = await openSession(loadCluster(opts.cluster));
      if (opts.node !== undefined && !session.docker.has(opts.node)) {
        throw new UserError(`no node ${opts.node} in ${session.cluster.file}`, `nodes: ${[...session.docker.keys()].join(", ")}`);
      }
      const listing = await listNodes(session, opts.node === undefined ? undefined : new Set([opts.node]));
      const chosen = targetDeployments(target, listing.flatMap((l) => (l.reachable ? l.containers : [])), "logs");
      const sources = listing.flatMap((l) => (l.reachable ? l.containers.filter((c) => chosen.has(c.labels.deployment)).map((c) => ({ node: l.node, docker: l.docker, c: c.c })) : []));
      const lost = listing.flatMap((l) => (l.reachable ? [] : [`${l.node} (${l.reason})`]));
      // What an unreachable node logged is unknown: said, and the exit status is 1, but the others are shown.
      if (lost.length > 0) {
        io.err(`warning: could not read ${lost.join(", ")}; its logs are not shown`);
        process.exitCode = EXIT_USER;
      }
      if (sources.length === 0) throw new UserError(`no containers of ${target} on the ${lost.length > 0 ? "nodes that answered" : "cluster"}`, "launcher status lists what runs");
      // Engines print their arguments at start (vLLM's "non-default args:" showed api_key verbatim
      // before vllm/entrypoints/utils.py redact_sensitive_args): the keys up recorded are hidden.
      const store = openStore();
      const secrets = [...chosen].flatMap((d) => store.engineKey(session.cluster.name, d) ?? []);
      store.close();
      const shown = (text: string): string => redactText(text, secrets);
      const width = Math.max(...sources.map((s) => s.node.length));
      const prefix = (node: string): string => `[${node.padEnd(width)}]`;
      if (!opts.follow) {
        const lines: { time: string; node: string; text: string }[] = [];
        await Promise.all(
          sources.map(async (s) => {
            for await (const raw of s.docker.logs(s.c.name, { tail })) {
              const { time, text } = splitTimestamp(raw);
              lines.push({ time: time ?? "", node: s.node, text });
            }
          }),
        );
        lines.sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : 0));
        for (const l of lines) io.out(`${prefix(l.node)} ${shown(l.text)}`);
        return;
      }
      await withInterrupts(async (signal) => {
        await Promise.all(
          sources.map(async (s) => {
            for await (const raw of s.docker.logs(s.c.name, { tail, follow: true, signal })) io.out(`${prefix(s.node)} ${shown(splitTimestamp(raw).text)}`);
          }),
        );
      });
      process.exitCode = lost.length > 0 ? EXIT_USER : 0;
    });
}
