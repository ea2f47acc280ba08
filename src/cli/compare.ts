import { writeFileSync } from "node:fs";
import type { Command } from "commander";
import { UserError } from "../config/errors.js";
import { resolveSides } from "../measure/compare/resolve.js";
import { markdownTable, textTable } from "../measure/compare/table.js";
import { loadCluster } from "../app/this-process.js";
import { openStore, withStore } from "../app/host.js";
import type { Output } from "../app/output.js";
import { clusterOption, jsonOption, outputOption, parseCount } from "./options.js";
import { abInOneLane } from "../measure/compare/ab.js";
import { benchPort } from "../measure/bench/bench.js";
import { DEFAULT_EVAL, evalTarget } from "../measure/eval/eval.js";
import { openSession } from "../nodes/session.js";
import { parseConcurrencies } from "../measure/bench/workload.js";
import { DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN } from "./bench.js";
import { loadSet } from "./eval.js";
import { runUp } from "./up.js";
import { withInterrupts } from "./interrupts.js";
import type { Comparison } from "../measure/compare/compare.js";

interface CompareFlags {
  markdown?: boolean;
  plot?: string;
  json?: boolean;
  run?: boolean;
  lane?: string;
  cluster?: string;
  concurrency: string;
  requests?: string;
  runs: string;
  outputLen?: string;
  set?: string;
}

/** The table, markdown or JSON, and the plot: what `compare` prints, from stored runs or from --run. */
async function show(c: Comparison, opts: CompareFlags, io: Output): Promise<void> {
  if (opts.plot !== undefined) {
    const file = opts.plot;
    const { plotSvg } = await import("../measure/compare/svg.js");
    const svg = await plotSvg(c);
    try {
      writeFileSync(file, svg);
    } catch (e) {
      throw new UserError(`--plot ${file}: cannot write it (${(e as NodeJS.ErrnoException).code ?? String(e)})`, "name a file in a folder that exists and that you may write");
    }
  }
  if (opts.json) io.json(c);
  else io.out(opts.markdown ? markdownTable(c) : textTable(c));
}

/** compare --run: A then B in one lane, with bench's and eval's use cases as the ports; their runs are stored as theirs are. */
async function runBoth(a: string, b: string, opts: CompareFlags, io: Output): ReturnType<typeof abInOneLane> {
  const lane = opts.lane;
  if (lane === undefined) throw new UserError("compare --run needs --lane NAME: the lane A and then B are booted in", "e.g. launcher compare A B --run --lane ab");
  const set = opts.set === undefined ? undefined : loadSet(opts.set, io);
  const session = await openSession(loadCluster(opts.cluster));
  const store = openStore();
  // up's own boot view and result go to stderr: stdout is the comparison.
  const aside: Output = { ...io, out: io.err, json: (v) => io.err(JSON.stringify(v)) };
  try {
    return await withInterrupts((signal) =>
      abInOneLane(a, b, lane, {
        up: (recipe, l) => runUp(recipe, { lane: l, ...(opts.cluster === undefined ? {} : { cluster: opts.cluster }) }, aside),
        bench: benchPort(session, store, {
          concurrencies: parseConcurrencies(opts.concurrency),
          ...(opts.requests === undefined ? {} : { requests: parseCount(opts.requests, "--requests", 1) }),
          inputLen: DEFAULT_INPUT_LEN,
          outputLen: opts.outputLen === undefined ? DEFAULT_OUTPUT_LEN : parseCount(opts.outputLen, "--output-len", 1),
          depth: 0,
          runs: parseCount(opts.runs, "--runs", 1),
          requestTimeoutS: 600,
          signal,
        }),
        ...(set === undefined ? {} : { eval: (t: string) => evalTarget(t, set, { ...DEFAULT_EVAL, requestOptions: {} }, { route: { kind: "direct", session }, store, now: () => new Date(), signal }) }),
        say: (text) => io.err(text),
      }, signal),
    );
  } finally {
    store.close();
  }
}

export function registerCompare(program: Command, io: Output): void {
  program
    .command("compare")
    .description("compare two recipes, deployments, lanes or stored runs: boot figures, bench speed with spread, eval answers; a difference is called only beyond the spread")
    .argument("<a>", "recipe, deployment, lane or stored run id (series/ID, run/ID, deployment/NAME, lane/NAME, recipe/NAME pick the kind)")
    .argument("<b>", "the other side, named the same ways")
    .option("--markdown", "print the table as markdown, for a recipe comment or an issue")
    .option("--plot <file.svg>", "also draw throughput and latency against concurrency for both sides, with spread, into this SVG file")
    .option("--run", "A and B are recipes: boot A in --lane, bench and eval it, swap the lane to B, the same, then compare")
    .option("--lane <name>", "with --run: the lane A and then B serve in (it ends serving B)")
    .addOption(clusterOption())
    .option("--concurrency <list>", "with --run: bench's concurrency levels (1,4,8)", "1")
    .option("--requests <n>", "with --run: bench's requests per level")
    // Three, not two: with two runs a side Welch's interval has about one degree of freedom and,
    // at the table's Bonferroni-corrected level, is too wide to call even a fourfold difference.
    .option("--runs <n>", "with --run: bench runs per side (2 or more gives Welch's interval; 3 or more to call a difference)", "3")
    .option("--output-len <n>", "with --run: tokens asked per bench answer")
    .option("--set <file.jsonl>", "with --run: the eval set both sides answer (without it, answers are not compared)")
    .addOption(jsonOption("print the comparison as JSON")).addOption(outputOption())
    .action(async (a: string, b: string, opts: CompareFlags) => {
      if (opts.markdown && opts.json) throw new UserError("--markdown and --json each print the whole comparison: pass one of them");
      // compare's statistics and plot libraries (@stdlib, vega: most of what the CLI would read at
      // its start) are loaded when compare runs, not by every command (test/unit/cli-footprint.test.ts).
      const { compare } = await import("../measure/compare/compare.js");
      const c = compare(...(opts.run ? await runBoth(a, b, opts, io) : await withStore((store) => resolveSides(store, a, b))));
      await show(c, opts, io);
    });
}
