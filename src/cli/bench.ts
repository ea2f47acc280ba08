import type { Command } from "commander";
import { EXIT_USER, UserError } from "../config/errors.js";
import { readTextFile } from "../config/read-file.js";
import { apiKeyFileOption, gatewayOf } from "./gateway-key.js";
import { parseConcurrencies, parsePrompts } from "../measure/bench/workload.js";
import type { LevelProgress } from "../measure/bench/load.js";
import { benchDeps, benchTarget } from "../measure/bench/bench.js";
import { openSession } from "../nodes/session.js";
import type { ServeResult } from "../contract/evidence.js";
import { parseDuration } from "../config/duration.js";
import { withInterrupts } from "./interrupts.js";
import { loadCluster, optionalClusterPath } from "../app/this-process.js";
import { openStore } from "../app/host.js";
import type { Output } from "../app/output.js";
import { clusterOption, jsonOption, outputOption, parseCount } from "./options.js";

/** vllm bench serve's random dataset defaults (vllm/benchmarks/datasets: --random-input-len 1024, --random-output-len 128). */
export const DEFAULT_INPUT_LEN = 1024;
export const DEFAULT_OUTPUT_LEN = 128;
/** A prompts file is read whole: bounded like every file the user names, but larger than a config. */
const MAX_PROMPTS_BYTES = 64 * 1024 * 1024;

interface BenchFlags {
  concurrency: string;
  requests?: string;
  duration?: string;
  inputLen?: string;
  outputLen?: string;
  prompts?: string;
  depth?: string;
  runs: string;
  gateway?: string;
  apiKeyFile?: string;
  requestTimeout: string;
  cluster?: string;
  json?: boolean;
}

const ms = (x: number): string => x.toFixed(1);

/** One level as one line of the table. */
export function levelLine(r: ServeResult): string {
  const accept = r.spec_decode_acceptance_rate === undefined ? "-" : `${r.spec_decode_acceptance_rate.toFixed(1)}%`;
  return [
    String(r.max_concurrency).padStart(4),
    `${r.completed}`.padStart(5),
    `${r.failed}`.padStart(6),
    r.request_throughput.toFixed(2).padStart(7),
    r.output_throughput.toFixed(1).padStart(9),
    `${ms(r.mean_ttft_ms)}/${ms(r.p99_ttft_ms)}`.padStart(15),
    `${ms(r.mean_tpot_ms)}/${ms(r.p99_tpot_ms)}`.padStart(13),
    `${ms(r.mean_itl_ms)}/${ms(r.p99_itl_ms)}`.padStart(13),
    `${ms(r.mean_e2el_ms)}/${ms(r.p99_e2el_ms)}`.padStart(17),
    accept.padStart(7),
  ].join("  ");
}

export const LEVEL_HEADER = ["conc", " done", "failed", "  req/s", "out tok/s", "TTFT mean/p99", "TPOT mean/p99", " ITL mean/p99", "E2E mean/p99 (ms)", " accept"]
  .map((h, i) => h.padStart([4, 5, 6, 7, 9, 15, 13, 13, 17, 7][i] ?? 0))
  .join("  ");

export function registerBench(program: Command, io: Output): void {
  program
    .command("bench")
    .description("stream chat completions at a deployment, lane or model and report TTFT, TPOT, ITL, latency and throughput; every run is stored")
    .argument("<target>", "deployment, lane or recipe name (deployment/NAME, lane/NAME, recipe/NAME when a name fits several), else a served model name")
    .option("--concurrency <list>", "requests in flight at once, one level each (1,4,8)", "1")
    .option("--requests <n>", "requests per level (default: 4 per stream, at least 8; with --duration, until it ends)")
    .option("--duration <duration>", "send requests for this long per level (30s, 2m), or until --requests are sent")
    .option("--input-len <n>", `prompt length in words, about one token each (default ${DEFAULT_INPUT_LEN})`)
    .option("--output-len <n>", `tokens asked per answer (max_completion_tokens; default ${DEFAULT_OUTPUT_LEN})`)
    .option("--prompts <file.jsonl>", 'prompts, one JSON object a line: {"prompt": "..."} or {"messages": [...]}, optional "output_len"')
    .option("--depth <n>", "words of earlier context before each prompt, as llama-benchy's --depth (default 0)")
    .option("--runs <n>", "repeat the whole series N times (spread for `launcher compare`)", "1")
    .option("--gateway <url>", "go through `launcher serve` at this URL, not to the engine directly")
    .addOption(apiKeyFileOption())
    .option("--request-timeout <duration>", "a request still streaming after this long fails", "10m")
    .addOption(clusterOption())
    .addOption(jsonOption("print the runs as JSON, each level with the serving benchmark's result keys (mean_ttft_ms, p99_itl_ms, output_throughput, ...)")).addOption(outputOption())
    .action(async (target: string, opts: BenchFlags) => {
      const concurrencies = parseConcurrencies(opts.concurrency);
      const count = (text: string | undefined, flag: string, min: number, preset: number): number => (text === undefined ? preset : parseCount(text, flag, min));
      if (opts.prompts !== undefined && (opts.inputLen !== undefined || opts.depth !== undefined)) {
        throw new UserError("--prompts gives the prompts: --input-len and --depth make synthetic ones", "drop one of them");
      }
      const prompts = opts.prompts === undefined ? undefined : { path: opts.prompts, ...parsePrompts(opts.prompts, readTextFile(opts.prompts, "prompts file", MAX_PROMPTS_BYTES)) };
      const durationMs = opts.duration === undefined ? undefined : parseDuration(opts.duration, "--duration");
      if (durationMs !== undefined && durationMs <= 0) throw new UserError(`--duration ${opts.duration} is no time`, "e.g. --duration 30s");
      const requests = opts.requests === undefined ? undefined : parseCount(opts.requests, "--requests", 1);
      const gateway = gatewayOf(opts);
      // Through a gateway with no cluster file given or found (a Kubernetes Service, say): TARGET is the model asked for.
      const session = gateway !== undefined && optionalClusterPath(opts.cluster) === undefined ? undefined : await openSession(loadCluster(opts.cluster));
      const store = openStore();
      let lastShown = 0;
      const progress = (run: number, p: LevelProgress): void => {
        const now = Date.now();
        if (now - lastShown < 1000 && p.done !== p.sent) return;
        lastShown = now;
        const rate = p.elapsedS > 0 ? p.chunks / p.elapsedS : 0;
        io.err(`run ${run} concurrency ${p.concurrency}: ${p.done} done (${p.failed} failed) of ${p.sent} sent, ${rate.toFixed(0)} tok/s, ${p.elapsedS.toFixed(1)} s`);
      };
      try {
        const runs = await withInterrupts((signal) =>
          benchTarget(
            {
              target,
              concurrencies,
              ...(requests === undefined ? {} : { requests }),
              ...(durationMs === undefined ? {} : { durationS: durationMs / 1000 }),
              inputLen: count(opts.inputLen, "--input-len", 1, DEFAULT_INPUT_LEN),
              outputLen: count(opts.outputLen, "--output-len", 1, DEFAULT_OUTPUT_LEN),
              depth: count(opts.depth, "--depth", 0, 0),
              ...(prompts === undefined ? {} : { prompts }),
              runs: parseCount(opts.runs, "--runs", 1),
              ...(gateway === undefined ? {} : { gateway }),
              requestTimeoutS: parseDuration(opts.requestTimeout, "--request-timeout") / 1000,
              signal,
              onProgress: progress,
              onLevel: (run, r) => {
                if (r.failed > 0) io.warn(`run ${run} concurrency ${r.max_concurrency}: ${r.failed} of ${r.completed + r.failed} requests failed: ${r.errors.find((e) => e !== "") ?? ""}`);
                // Each level as it ends: what an interrupted run measured is shown too (it is not stored).
                if (opts.json) return;
                if (r.max_concurrency === concurrencies[0]) io.out(`run ${run}\n${LEVEL_HEADER}`);
                io.out(levelLine(r));
              },
            },
            benchDeps(session, store),
          ),
        );
        const failed = runs.reduce((a, run) => a + run.results.reduce((b, r) => b + r.failed, 0), 0);
        if (opts.json) io.json({ series: runs[0]?.series ?? null, runs });
        else {
          const first = runs[0];
          if (first !== undefined) {
            const s = first.subject;
            const boot = s.boot === undefined ? "" : `; boot: ${[s.boot.load_seconds === undefined ? "" : `load ${s.boot.load_seconds} s`, s.boot.kv_tokens === undefined ? "" : `KV ${s.boot.kv_tokens.toLocaleString("en-US")} tokens`].filter(Boolean).join(", ")}`;
            io.out(`${s.deployment ?? s.target}: recipe ${s.recipe ?? "?"} ${s.recipe_hash ?? ""}${s.engine_version === undefined ? "" : `, engine ${s.engine_version}`}${boot}`);
            io.out(`stored: series ${first.series}, runs ${runs.map((r) => r.id).join(", ")}`);
          }
        }
        // A failed request is never hidden: the runs are stored and shown, and the exit status says so.
        if (failed > 0) process.exitCode = EXIT_USER;
      } finally {
        store.close();
      }
    });
}
