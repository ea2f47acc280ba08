import { createHash } from "node:crypto";
import { Option, type Command } from "commander";
import { hasErrors } from "../config/diagnostic.js";
import { UserError } from "../config/errors.js";
import { readTextFile } from "../config/read-file.js";
import { DEFAULT_EVAL, evalTarget, type EvalProgress, type EvalRoute, type LoadedSet } from "../measure/eval/eval.js";
import type { ServingTarget } from "../measure/serving-target.js";
import { openSession } from "../nodes/session.js";
import { parseEvalSet } from "../measure/eval/set.js";
import { REASONING_EFFORTS, requestOptions, type ReasoningEffort } from "../measure/eval/request-options.js";
import type { EvalRun } from "../contract/evidence.js";
import { apiKeyFileOption, gatewayOf } from "./gateway-key.js";
import { parseDuration } from "../config/duration.js";
import { withInterrupts } from "./interrupts.js";
import { loadCluster, optionalClusterPath } from "../app/this-process.js";
import { withStore } from "../app/host.js";
import { clusterOption, jsonOption, outputOption, parseCount } from "./options.js";
import type { Output } from "../app/output.js";

interface EvalFlags {
  set: string;
  cluster?: string;
  gateway?: string;
  apiKeyFile?: string;
  temperature: string;
  concurrency: string;
  maxTokens?: string;
  chatTemplateKwargs?: string;
  reasoningEffort?: ReasoningEffort;
  timeout: string;
  json?: boolean;
}

/** An eval set is bigger than a config file: a few thousand long prompts. */
const MAX_SET_BYTES = 64 * 1024 * 1024;
/** Wrong items listed by name after the score; --json has them all. */
const SHOWN_WRONG = 10;
/** Progress on stderr at most this often (and at the end). */
const PROGRESS_EVERY_MS = 1000;

export function loadSet(file: string, io: Output): LoadedSet {
  const text = readTextFile(file, "eval set", MAX_SET_BYTES);
  const parsed = parseEvalSet(file, text);
  if (hasErrors(parsed.diagnostics)) throw new UserError(`eval set ${file} has errors`, "fix the lines named above; each is one JSON object", parsed.diagnostics);
  io.diagnostics(parsed.diagnostics);
  return { path: file, sha256: createHash("sha256").update(text, "utf8").digest("hex"), items: parsed.items };
}

function parseTemperature(text: string): number {
  const t = /^\d+(\.\d+)?$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isFinite(t)) throw new UserError(`--temperature ${JSON.stringify(text)} is not a number from 0`, "e.g. --temperature 0 (greedy, the default)");
  return t;
}

/** The route to the target: a gateway (its key as gatewayOf reads it), else the cluster's heads directly. */
async function routeOf(flags: EvalFlags): Promise<EvalRoute> {
  const via = gatewayOf(flags);
  if (via === undefined) return { kind: "direct", session: await openSession(loadCluster(flags.cluster)) };
  // A cluster file given or found tells what serves TARGET (the stored subject); none is fine here.
  const session = optionalClusterPath(flags.cluster) === undefined ? undefined : await openSession(loadCluster(flags.cluster));
  return { kind: "gateway", ...via, ...(session === undefined ? {} : { session }) };
}

/** `X/N answered, correct so far` on stderr, at most once a second and at the end. */
function progressLine(io: Output): (p: EvalProgress) => void {
  let last = 0;
  return (p) => {
    const now = Date.now();
    if (p.done < p.total && now - last < PROGRESS_EVERY_MS) return;
    last = now;
    io.err(`eval: ${p.done}/${p.total} answered, ${p.correct} correct${p.failed > 0 ? `, ${p.failed} failed` : ""}`);
  };
}

function printRun(run: EvalRun, io: Output): void {
  const failed = run.items.filter((i) => i.error !== undefined);
  const wrong = run.items.filter((i) => !i.correct && i.error === undefined);
  const pct = run.total === 0 ? 0 : (100 * run.correct) / run.total;
  io.out(`${run.correct}/${run.total} (${pct.toFixed(1)}%) ${run.subject.deployment ?? run.subject.target}, temperature ${run.temperature}${failed.length > 0 ? `; ${failed.length} failed (counted wrong)` : ""}; run ${run.id}`);
  for (const i of failed) io.out(`  failed ${i.id}: ${i.error ?? ""}`);
  for (const i of wrong.slice(0, SHOWN_WRONG)) io.out(`  wrong  ${i.id}: expected ${JSON.stringify(i.expected)} (${i.grader}), answered ${JSON.stringify((i.answer ?? "").slice(0, 80))}`);
  if (wrong.length > SHOWN_WRONG) io.out(`  ... and ${wrong.length - SHOWN_WRONG} more wrong (--json lists every item)`);
}

export function registerEval(program: Command, io: Output): void {
  program
    .command("eval")
    .description("ask a question set (JSONL) of a lane, deployment or model and grade the answers: prints X/N, stores each answer and grade")
    .argument("<target>", "deployment, lane, recipe (deployment/NAME, lane/NAME, recipe/NAME when a name fits several) or served model name")
    .requiredOption("--set <file>", 'the questions, one JSON object a line: {"id","prompt"|"messages","expected","grader":"exact|contains|regex|choice"}')
    .addOption(clusterOption())
    .option("--gateway <url>", "ask through a launcher gateway at this URL for model TARGET, not the engine directly")
    .addOption(apiKeyFileOption())
    .option("--temperature <t>", "sampling temperature sent with every request", String(DEFAULT_EVAL.temperature))
    .option("--concurrency <n>", "requests in flight at once", String(DEFAULT_EVAL.concurrency))
    .option("--max-tokens <n>", "bound on each answer's length (default: the engine's)")
    .option("--chat-template-kwargs <json>", `a JSON object handed to the chat template with every request, e.g. '{"thinking":false}'`)
    .addOption(new Option("--reasoning-effort <level>", "reasoning_effort sent with every request").choices(REASONING_EFFORTS))
    .option("--timeout <duration>", "one request's time bound", `${DEFAULT_EVAL.requestTimeoutMs / 60_000}m`)
    .addOption(jsonOption("print the run (every item's answer and grade) as JSON"))
    .addOption(outputOption())
    .action(async (target: string, flags: EvalFlags) => {
      const settings = {
        temperature: parseTemperature(flags.temperature),
        concurrency: parseCount(flags.concurrency, "--concurrency", 1),
        ...(flags.maxTokens === undefined ? {} : { maxTokens: parseCount(flags.maxTokens, "--max-tokens", 1) }),
        requestOptions: requestOptions({
          ...(flags.chatTemplateKwargs === undefined ? {} : { chatTemplateKwargs: flags.chatTemplateKwargs }),
          ...(flags.reasoningEffort === undefined ? {} : { reasoningEffort: flags.reasoningEffort }),
        }),
        requestTimeoutMs: parseDuration(flags.timeout, "--timeout"),
      };
      const set = loadSet(flags.set, io);
      const route = await routeOf(flags);
      const started = (serving: ServingTarget): void => io.err(`eval: ${set.items.length} items of ${set.path} to ${serving.subject.deployment ?? serving.model} at ${serving.url}, ${settings.concurrency} at a time`);
      const run = await withStore((store) => withInterrupts((signal) => evalTarget(target, set, settings, { route, store, now: () => new Date(), progress: progressLine(io), signal, started, warn: io.warn })), io.warn);
      if (flags.json) io.json(run);
      else printRun(run, io);
    });
}
