import type { Command } from "commander";
import { EXIT_USER, UserError } from "../config/errors.js";
import { splitTimestamp } from "../engine/boot-log.js";
import { openSession } from "../nodes/session.js";
import { logSources } from "../app/logs.js";
import { redactText } from "../config/redact.js";
import { loadCluster } from "../app/this-process.js";
import { openStore } from "../app/host.js";
import type { Output } from "../app/output.js";
import { withInterrupts } from "./interrupts.js";
import { clusterOption, followOption, parseCount, tailOption } from "./options.js";
import { parseSince } from "./duration.js";
import { containerText } from "./terminal.js";

export function registerLogs(program: Command, io: Output): void {
  program
    .command("logs")
    .description("the logs of a deployment, node-prefixed, merged in time order")
    .argument("<target>", "deployment, lane or recipe name (deployment/NAME, lane/NAME, recipe/NAME when a name fits several)")
    .option("--node <name>", "only this node")
    .addOption(followOption("keep printing new lines"))
    .addOption(tailOption("last N lines per node", "200"))
    .option("--since <duration|time>", "only lines since this long ago (10m, 1h30m) or since a time with its zone (2026-12-03T05:00:00Z)")
    .option("-t, --timestamps", "show each line's time (UTC, as docker logs records it)")
    .addOption(clusterOption())
    .action(async (target: string, opts: { node?: string; follow?: boolean; tail: string; since?: string; timestamps?: boolean; cluster?: string }) => {
      const tail = parseCount(opts.tail, "--tail");
      const since = opts.since === undefined ? undefined : parseSince(opts.since, "--since");
      const read = { tail, ...(since === undefined ? {} : { since }) };
      const session = await openSession(loadCluster(opts.cluster));
      const { chosen, sources, lost } = await logSources(session, target, opts.node);
      // What an unreachable node logged is unknown: said, and the exit status is 1, but the others are shown.
      if (lost.length > 0) {
        io.warn(`could not read ${lost.join(", ")}; its logs are not shown`);
        process.exitCode = EXIT_USER;
      }
      if (sources.length === 0) throw new UserError(`no containers of ${target} on the ${lost.length > 0 ? "nodes that answered" : "cluster"}`, "launcher status lists what runs");
      // Engines print their arguments at start (vLLM's "non-default args:" showed api_key verbatim
      // before vllm/entrypoints/utils.py redact_sensitive_args): the keys up recorded are hidden.
      const store = openStore();
      const secrets = [...chosen].flatMap((d) => store.engineKey(session.cluster.name, d) ?? []);
      store.close();
      const onTerminal = containerText(process.stdout);
      const shown = (text: string): string => onTerminal(redactText(text, secrets));
      const width = Math.max(...sources.map((s) => s.node.length));
      const prefix = (node: string, time: string | undefined): string => `${opts.timestamps ? `${time ?? "-"} ` : ""}[${node.padEnd(width)}]`;
      if (!opts.follow) {
        const lines: { time: string | undefined; node: string; text: string }[] = [];
        await Promise.all(
          sources.map(async (s) => {
            for await (const raw of s.docker.logs(s.c.name, read)) {
              const { time, text } = splitTimestamp(raw);
              lines.push({ time, node: s.node, text });
            }
          }),
        );
        const at = (l: { time: string | undefined }): string => l.time ?? "";
        lines.sort((a, b) => (at(a) < at(b) ? -1 : at(a) > at(b) ? 1 : 0));
        for (const l of lines) io.out(`${prefix(l.node, l.time)} ${shown(l.text)}`);
        return;
      }
      const interrupted = await withInterrupts(async (signal) => {
        await Promise.all(
          sources.map(async (s) => {
            for await (const raw of s.docker.logs(s.c.name, { ...read, follow: true, signal })) {
              const { time, text } = splitTimestamp(raw);
              io.out(`${prefix(s.node, time)} ${shown(text)}`);
            }
          }),
        );
        return signal.aborted;
      });
      // A follow ended by Ctrl-C keeps the signal's exit status (130), which withInterrupts set.
      if (!interrupted) process.exitCode = lost.length > 0 ? EXIT_USER : 0;
    });
}
