import { setTimeout as delay } from "node:timers/promises";
import { engineAuthHeaders } from "../contract/engine-auth.js";
import type { DeploymentStatus } from "../contract/deployment.js";
import type { WedgedDeployment } from "../contract/generation.js";
import { boundText, noAnswerWithin, noteGeneration, probeDue, probeSucceeded, startGeneration, wedgedMessage, wedgedOf, type GenerationState, type GenerationTiming, type Wedged } from "./generation.js";

/** What a probe is sent to: a serving deployment's engine, as the gateway reaches it. */
export interface ProbeTarget {
  readonly endpoint: string;
  readonly served_model: string;
  /** The engine's own key (the store's, as the gateway sends it); undefined: none recorded. */
  readonly apiKey: string | undefined;
}

/** How one probe ended: a token generated, an error worth trying again within the bound, or a refused request (4xx: nothing learnt). */
export type ProbeOutcome = { readonly kind: "generated" } | { readonly kind: "failed"; readonly why: string } | { readonly kind: "refused"; readonly why: string };

/** One request of a probe; its signal ends it at the bound. */
export type ProbeOnce = (target: ProbeTarget, signal: AbortSignal) => Promise<ProbeOutcome>;

/** The most of a probe's answer read: a one-token completion is a few hundred bytes. */
const PROBE_ANSWER_BYTES = 64 * 1024;

/** The wait between a probe's quick failures (a dropped connection), within its bound. */
const PROBE_RETRY_MS = 1000;

/**
 * The one-token request: the Completions API, which vLLM serves for every text generation model
 * and which needs no chat template, unlike /v1/chat/completions (vllm-project/vllm
 * docs/source/serving/openai_compatible_server.md, "Supported APIs"). `model` is the served name,
 * as every request through the gateway names it; the key goes as the gateway sends it
 * (src/contract/engine-auth.ts).
 */
export const PROBE_PATH = "/v1/completions";
export const probeBody = (servedModel: string): string => JSON.stringify({ model: servedModel, prompt: "Hello", max_tokens: 1, temperature: 0, stream: false });

/** Did an answer's body complete at least one token? OpenAI's usage.completion_tokens, else a non-empty choice's text. */
export function generatedToken(body: string): boolean {
  try {
    const a = JSON.parse(body) as { usage?: { completion_tokens?: unknown } | null; choices?: { text?: unknown }[] };
    const tokens = a.usage?.completion_tokens;
    if (typeof tokens === "number") return tokens >= 1;
    const text = Array.isArray(a.choices) ? a.choices[0]?.text : undefined;
    return typeof text === "string" && text.length > 0;
  } catch {
    return false;
  }
}

/** A probe over Node's fetch: the answer read up to PROBE_ANSWER_BYTES, the request ended by `signal`. */
export const httpProbe: ProbeOnce = async (target, signal) => {
  const res = await fetch(`${target.endpoint}${PROBE_PATH}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...engineAuthHeaders(target.apiKey) },
    body: probeBody(target.served_model),
    signal,
    redirect: "error",
  });
  const reader = res.body?.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const chunk = reader === undefined ? { done: true as const, value: undefined } : await reader.read();
    if (chunk.done) break;
    size += chunk.value.byteLength;
    if (size > PROBE_ANSWER_BYTES) {
      await reader?.cancel();
      return { kind: "failed", why: `its probe's answer passed ${PROBE_ANSWER_BYTES} bytes` };
    }
    parts.push(chunk.value);
  }
  if (res.status >= 400 && res.status < 500) return { kind: "refused", why: `the engine refused the probe (HTTP ${res.status})` };
  if (res.status !== 200) return { kind: "failed", why: `its probe of one token was answered HTTP ${res.status}` };
  return generatedToken(Buffer.concat(parts).toString("utf8")) ? { kind: "generated" } : { kind: "failed", why: "its probe of one token was answered with no token" };
};

/**
 * One probe within its bound: quick failures (a connection refused, a 5xx) are tried again until
 * the bound is spent, so that one lost connection is no wedge; the last failure is the one said.
 */
export async function probeWithin(once: ProbeOnce, target: ProbeTarget, boundMs: number, stop: AbortSignal): Promise<ProbeOutcome> {
  const bound = AbortSignal.timeout(boundMs);
  const signal = AbortSignal.any([bound, stop]);
  const noAnswer: ProbeOutcome = { kind: "failed", why: noAnswerWithin(boundMs) };
  let last = noAnswer;
  while (!signal.aborted) {
    try {
      const outcome = await once(target, signal);
      if (outcome.kind !== "failed") return outcome;
      last = outcome;
    } catch (e) {
      if (signal.aborted) break;
      last = { kind: "failed", why: `its probe of one token failed: ${(e as Error).message}` };
    }
    await delay(PROBE_RETRY_MS, undefined, { signal }).catch(() => undefined);
  }
  return last === noAnswer ? noAnswer : { kind: "failed", why: `${last.why} (tried again for ${boundText(boundMs)})` };
}

/** A serving deployment as discovery reports it, with its cluster. */
export type Watched = DeploymentStatus & { readonly cluster: string };

export interface GenerationWatchDeps {
  readonly probe: ProbeOnce;
  /** The engine's key as the store holds it (the gateway's). */
  readonly engineKey: (cluster: string, deployment: string) => string | undefined;
  readonly timing: GenerationTiming;
  readonly now: () => number;
  readonly log: (line: string) => void;
  /** A deployment became wedged (once per wedge: it is said again only after it generated again). */
  readonly onWedged?: (seen: Watched, wedged: Wedged, message: string) => void;
  /** A wedge said is over: it generated again, or it is no longer watched (not serving, a new launch). */
  readonly onCleared?: (seen: Watched) => void;
  /** Each deployment's last generation and wedged state, after every change (the daemon's /metrics). */
  readonly onState?: (cluster: string, deployment: string, state: { readonly lastOk: number | undefined; readonly wedged: boolean } | undefined) => void;
}

interface Entry {
  seen: Watched;
  state: GenerationState;
  /** The wedge said (to the log and onWedged), until it generates again. */
  said: Wedged | undefined;
  probe: AbortController | undefined;
}

const key = (cluster: string, deployment: string): string => `${cluster}/${deployment}`;

/** How often the watch looks for a probe due or a bound passed. */
export const GENERATION_TICK_MS = 250;

/**
 * The daemon's watch of every serving deployment's generation (the rule is ./generation.ts): fed
 * discovery's snapshots and the gateway's completed answers, it probes the quiet ones and says
 * which are wedged (the gateway's 503, status, /metrics, the supervisor's restart).
 */
export class GenerationWatch {
  private readonly entries = new Map<string, Entry>();
  private readonly stopping = new AbortController();
  private readonly probes = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  /** Bumped whenever which deployments are wedged changed: the gateway rebuilds its routes. */
  version = 0;

  constructor(private readonly deps: GenerationWatchDeps) {}

  start(): void {
    this.timer ??= setInterval(() => this.tick(), GENERATION_TICK_MS);
    this.timer.unref();
  }

  /** One discovery snapshot: serving deployments are watched (a new launch anew), the others forgotten. */
  observe(deployments: readonly Watched[]): void {
    if (this.stopping.signal.aborted) return;
    const at = this.deps.now();
    const serving = new Map(deployments.filter((d) => d.status === "serving").map((d) => [key(d.cluster, d.deployment), d]));
    for (const [k, e] of this.entries) {
      const d = serving.get(k);
      if (d === undefined || d.boot !== e.seen.boot) this.forget(k, e);
    }
    for (const [k, d] of serving) {
      const e = this.entries.get(k);
      if (e === undefined) {
        this.entries.set(k, { seen: d, state: startGeneration(at), said: undefined, probe: undefined });
        this.report(d.cluster, d.deployment, { lastOk: undefined, wedged: false });
      } else e.seen = d;
    }
  }

  /** A 200 answer with at least one token came through the gateway from this deployment. */
  generated(cluster: string, deployment: string, at: number): void {
    const e = this.entries.get(key(cluster, deployment));
    if (e === undefined) return;
    e.state = noteGeneration(e.state, { kind: "generated", at });
    this.settle(e);
  }

  /** Time passed: probes due are sent, bounds passed are judged. */
  tick(): void {
    if (this.stopping.signal.aborted) return;
    const at = this.deps.now();
    for (const e of this.entries.values()) {
      if (probeDue(e.state, at, this.deps.timing)) this.probe(e, at);
      this.settle(e);
    }
  }

  /** The deployments wedged now, as the gateway answers for them. */
  wedged(): WedgedDeployment[] {
    const at = this.deps.now();
    return [...this.entries.values()].flatMap((e) => {
      const w = wedgedOf(e.state, at, this.deps.timing);
      if (w === undefined) return [];
      const { cluster, deployment, served_model, lane } = e.seen;
      return [{ cluster, deployment, served_model, ...(lane === undefined ? {} : { lane }), since: new Date(w.since).toISOString(), reason: w.why, message: wedgedMessage(deployment, w) }];
    });
  }

  /** Each wedged deployment's state in words, by `cluster/deployment` (the read API's supervision). */
  describe(): Record<string, string> {
    return Object.fromEntries(this.wedged().map((w) => [key(w.cluster, w.deployment), `wedged since ${w.since}`]));
  }

  /** Stops probing; a wedge said is no longer claimed (no one watches it any more). */
  async stop(): Promise<void> {
    this.stopping.abort();
    clearInterval(this.timer);
    await Promise.allSettled([...this.probes]);
    for (const e of this.entries.values()) if (e.said !== undefined) this.deps.onCleared?.(e.seen);
  }

  private probe(e: Entry, at: number): void {
    const { cluster, deployment } = e.seen;
    e.state = noteGeneration(e.state, { kind: "probe-started", at });
    const own = new AbortController();
    e.probe = own;
    const target: ProbeTarget = { endpoint: e.seen.endpoint, served_model: e.seen.served_model, apiKey: this.deps.engineKey(cluster, deployment) };
    const p = probeWithin(this.deps.probe, target, this.deps.timing.boundMs, AbortSignal.any([own.signal, this.stopping.signal]))
      .then((outcome) => {
        // Forgotten meanwhile (a new launch, no longer serving): its answer says nothing of what is watched now.
        if (this.entries.get(key(cluster, deployment)) !== e || own.signal.aborted) return;
        e.probe = undefined;
        const end = this.deps.now();
        if (outcome.kind === "generated") e.state = probeSucceeded(e.state, end);
        else if (outcome.kind === "refused") {
          e.state = noteGeneration(e.state, { kind: "probe-refused", at: end });
          this.deps.log(`generation: ${deployment}: ${outcome.why}; whether it generates is not known`);
        } else e.state = noteGeneration(e.state, { kind: "probe-failed", at: end, why: outcome.why });
        this.settle(e);
      })
      .finally(() => this.probes.delete(p));
    this.probes.add(p);
  }

  /** Says a wedge once when it is found, and its end when it generates again. */
  private settle(e: Entry): void {
    const { cluster, deployment } = e.seen;
    const w = wedgedOf(e.state, this.deps.now(), this.deps.timing);
    if (w !== undefined && e.said === undefined) {
      e.said = w;
      this.version++;
      const message = wedgedMessage(deployment, w);
      this.deps.log(`generation: ${message}`);
      this.deps.onWedged?.(e.seen, w, message);
    } else if (w === undefined && e.said !== undefined) {
      e.said = undefined;
      this.version++;
      this.deps.log(`generation: ${deployment} generates again (no longer wedged)`);
      this.deps.onCleared?.(e.seen);
    }
    this.report(cluster, deployment, { lastOk: e.state.lastOk, wedged: w !== undefined });
  }

  private report(cluster: string, deployment: string, state: { readonly lastOk: number | undefined; readonly wedged: boolean } | undefined): void {
    this.deps.onState?.(cluster, deployment, state);
  }

  private forget(k: string, e: Entry): void {
    e.probe?.abort();
    this.entries.delete(k);
    if (e.said !== undefined) {
      this.version++;
      this.deps.onCleared?.(e.seen);
    }
    this.report(e.seen.cluster, e.seen.deployment, undefined);
  }
}
