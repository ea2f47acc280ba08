import { checkInterrupted } from "../../config/abort.js";
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { UserError } from "../../config/errors.js";
import { acceptanceRate, readSpecCounters, serveResult } from "./metrics.js";
import { runLevel, type ChatEndpoint, type LevelProgress } from "./load.js";
import { syntheticPrompt, type BenchPrompt } from "./workload.js";
import type { EngineAdapter } from "../../engine/adapter.js";
import { adapterOf } from "../../engine/registry.js";
import type { BenchRun, BenchWorkload, BootFigures, RunSubject, ServeResult } from "../../contract/evidence.js";
import { engineAuthHeaders } from "../../contract/engine-auth.js";
import type { BootRecord, StateStore } from "../../store/store.js";
import { servingTarget } from "../serving-target.js";
import type { ClusterSession } from "../../nodes/session.js";

/** What `launcher bench` sends, and how long it may take. */
export interface BenchOptions {
  /** A deployment, lane or served model (`deployment/NAME`, `lane/NAME`, `model/NAME` when a name fits several). */
  readonly target: string;
  readonly concurrencies: readonly number[];
  /** Requests per level; without it and without `durationS`, DEFAULT_REQUESTS_PER_STREAM per stream. */
  readonly requests?: number;
  readonly durationS?: number;
  readonly inputLen: number;
  readonly outputLen: number;
  readonly depth: number;
  /** A `--prompts` file, read: it replaces the synthetic prompts. */
  readonly prompts?: { readonly path: string; readonly sha256: string; readonly prompts: readonly BenchPrompt[] };
  readonly runs: number;
  /** Through the gateway (`launcher serve`) at this base URL, with the client's key; else to the engine directly. */
  readonly gateway?: { readonly url: string; readonly apiKey?: string };
  readonly requestTimeoutS: number;
  readonly signal: AbortSignal;
  readonly onProgress?: (run: number, p: LevelProgress) => void;
  readonly onLevel?: (run: number, result: ServeResult) => void;
}

/** The shell bench needs: nodes to find the target on, the store, clocks and HTTP. */
export interface BenchDeps {
  /**
   * The nodes TARGET is found on. Absent: bench goes only through `gateway` (any OpenAI-compatible
   * URL: launcher's gateway, or a Kubernetes Service of `launcher export k8s`), TARGET is the model
   * asked for, and the run is stored under that name alone.
   */
  readonly session?: ClusterSession;
  readonly store: Pick<StateStore, "saveBenchRun" | "history" | "engineKey">;
  readonly now: () => Date;
  /** Seconds on a monotonic clock. */
  readonly clock: () => number;
  readonly endpoint: (baseUrl: string, headers: Readonly<Record<string, string>>) => ChatEndpoint;
  /** The text of a GET (the engine's metrics), undefined when it could not be read. */
  readonly scrape: (url: string, headers: Readonly<Record<string, string>>, signal: AbortSignal) => Promise<string | undefined>;
}

/** Requests per stream of a level when neither --requests nor --duration bounds it. */
export const DEFAULT_REQUESTS_PER_STREAM = 4;
/** The least requests a level sends by default (one stream of 4 says little about spread). */
export const DEFAULT_MIN_REQUESTS = 8;
/** Requests a level sends at most when only --duration bounds it. */
export const DURATION_REQUEST_CAP = 100_000;

/** How many requests a level may send: --requests, else a cap under --duration, else a default per stream. */
export function levelRequests(options: Pick<BenchOptions, "requests" | "durationS">, concurrency: number): number {
  if (options.requests !== undefined) return options.requests;
  if (options.durationS !== undefined) return DURATION_REQUEST_CAP;
  return Math.max(DEFAULT_MIN_REQUESTS, DEFAULT_REQUESTS_PER_STREAM * concurrency);
}

/**
 * Distinct synthetic prompts a level makes at most; a longer level takes them round again (by
 * then a prefix cache may hold the first ones: a run that long measures the steady state anyway).
 */
export const SYNTHETIC_PROMPTS = 1024;

function workloadOf(o: BenchOptions): BenchWorkload {
  return {
    concurrencies: o.concurrencies,
    ...(o.requests === undefined ? {} : { requests: o.requests }),
    ...(o.durationS === undefined ? {} : { duration_s: o.durationS }),
    ...(o.prompts === undefined ? { input_len: o.inputLen, depth: o.depth } : { prompts_file: { path: o.prompts.path, sha256: o.prompts.sha256 } }),
    output_len: o.outputLen,
  };
}

async function specCounters(deps: BenchDeps, engine: EngineAdapter | undefined, base: string, headers: Readonly<Record<string, string>>, signal: AbortSignal) {
  const names = engine?.specDecodeMetrics;
  if (names === undefined || engine === undefined) return {};
  const text = await deps.scrape(`${base}${engine.metricsPath}`, headers, signal);
  return text === undefined ? {} : readSpecCounters(text, names);
}

/**
 * `launcher bench TARGET`: streams chat completions at each concurrency, `runs` times, and stores
 * every run with what served it (deployment, recipe hash, the boot's figures, the engine
 * version). The speculative-decoding acceptance rate is read from the engine's metrics before and
 * after each level, when its adapter names the counters and the engine exposes them.
 */
export async function benchTarget(options: BenchOptions, deps: BenchDeps): Promise<BenchRun[]> {
  const via = options.gateway;
  // The one way eval and bench find what a target names (src/measure/serving-target.ts).
  const found = deps.session === undefined ? undefined : await servingTarget(deps.session, deps.store, options.target, "bench");
  const labels = found?.head;
  if (found !== undefined && labels === undefined) throw new Error(`servingTarget found ${options.target} without its head's labels`);
  const engine = labels === undefined ? undefined : adapterOf(labels.engine);
  const engineHeaders = engineAuthHeaders(found?.apiKey);
  let endpoint: ChatEndpoint;
  if (via !== undefined) endpoint = deps.endpoint(via.url.replace(/\/+$/, ""), engineAuthHeaders(via.apiKey));
  else if (labels !== undefined) endpoint = deps.endpoint(labels.endpoint, engineHeaders);
  else throw new UserError(`bench ${options.target}: no cluster to find it on`, "name its cluster with -c, or the URL that serves it with --gateway");
  const model = via === undefined ? (labels?.served_model ?? options.target) : (labels?.lane ?? labels?.served_model ?? options.target);
  const subject: RunSubject = found?.subject ?? { target: options.target };
  const prompts = options.prompts?.prompts;
  const series = randomUUID();
  const out: BenchRun[] = [];
  for (let run = 1; run <= options.runs && !options.signal.aborted; run++) {
    const started = deps.now();
    const results: ServeResult[] = [];
    for (const concurrency of options.concurrencies) {
      if (options.signal.aborted) break;
      const requests = levelRequests(options, concurrency);
      const levelPrompts = prompts ?? Array.from({ length: Math.min(requests, SYNTHETIC_PROMPTS) }, (_, i) => syntheticPrompt(i, options.inputLen, options.depth));
      const before = await specCounters(deps, engine, labels?.endpoint ?? "", engineHeaders, options.signal);
      const level = await runLevel(
        endpoint,
        levelPrompts,
        model,
        options.outputLen,
        { concurrency, requests, requestTimeoutS: options.requestTimeoutS, ...(options.durationS === undefined ? {} : { durationS: options.durationS }) },
        deps.clock,
        options.signal,
        (p) => options.onProgress?.(run, p),
      );
      const after = await specCounters(deps, engine, labels?.endpoint ?? "", engineHeaders, options.signal);
      const result = serveResult(level.outcomes, level.durationS, concurrency, acceptanceRate(before, after));
      results.push(result);
      options.onLevel?.(run, result);
    }
    // An interrupted run is not evidence: what it measured is shown, never stored as a whole run.
    if (options.signal.aborted) break;
    const record: BenchRun = { id: randomUUID(), series, run, started_at: started.toISOString(), ended_at: deps.now().toISOString(), subject, workload: workloadOf(options), results };
    deps.store.saveBenchRun(record);
    out.push(record);
  }
  return out;
}

/** The shell's HTTP: a streamed chat completion per call, and a GET for the metrics. */
export function httpChatEndpoint(baseUrl: string, headers: Readonly<Record<string, string>>): ChatEndpoint {
  return {
    async *chunks(body, signal) {
      let res: Response;
      try {
        res = await fetch(`${baseUrl}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body), signal });
      } catch (e) {
        const cause = (e as { cause?: { message?: string } }).cause?.message;
        throw new Error(`${(e as Error).message}${cause === undefined ? "" : `: ${cause}`}`);
      }
      if (res.status !== 200 || res.body === null) {
        const text = await res.text().catch(() => "");
        throw new Error(`HTTP ${res.status}: ${text.slice(0, 300)}`);
      }
      const decoder = new TextDecoder();
      for await (const chunk of res.body) yield decoder.decode(chunk as Uint8Array, { stream: true });
    },
  };
}

export async function httpScrape(url: string, headers: Readonly<Record<string, string>>, signal: AbortSignal): Promise<string | undefined> {
  try {
    const res = await fetch(url, { headers, signal: AbortSignal.any([signal, AbortSignal.timeout(5000)]) });
    return res.status === 200 ? await res.text() : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `bench(target)` as `launcher compare --run` takes it (its port): one workload for every target,
 * bench's own shell around this session and store.
 */
export function benchPort(session: ClusterSession, store: BenchDeps["store"], workload: Omit<BenchOptions, "target">): (target: string) => Promise<BenchRun[]> {
  return async (target) => {
    const runs = await benchTarget({ ...workload, target }, benchDeps(session, store));
    // benchTarget ends early and returns what it finished when aborted (bench's own command
    // prints that); as a step of compare --run, an interrupted bench is an interruption.
    checkInterrupted(workload.signal, `bench of ${target} stopped after ${runs.length} whole run(s)`);
    return runs;
  };
}

/** The real shell around a session and a store. */
export function benchDeps(session: ClusterSession | undefined, store: BenchDeps["store"]): BenchDeps {
  return { ...(session === undefined ? {} : { session }), store, now: () => new Date(), clock: () => performance.now() / 1000, endpoint: httpChatEndpoint, scrape: httpScrape };
}
