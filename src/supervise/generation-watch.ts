import { setTimeout as delay } from "node:timers/promises";
import { engineAuthHeaders } from "../contract/engine-auth.js";
import type { DeploymentStatus } from "../contract/deployment.js";
import { PROBE_ANSWER_BYTES, PROBE_PATH, PROBE_RETRY_MS, probeBody, type WedgedDeployment } from "../contract/generation.js";
import { boundText, noAnswerWithin, noteGeneration, probeDue, probeSucceeded, startGeneration, wedgedMessage, wedgedOf, type GenerationState, type GenerationTiming, type Wedged } from "./generation.js";

/** What a probe is sent to: a serving deployment's engine, as the gateway reaches it. */
export interface ProbeTarget {
  readonly endpoint: string;
  readonly served_model: string;
  /** The engine's own key (the store's, as the gateway sends it); undefined: none recorded. */
  readonly apiKey: string | undefined;
}

/**
 * How one probe ended: a token generated, an error worth trying again within the bound, a refused
 * request (4xx: nothing learnt), or stopped (the watch stopped, the launch was forgotten: nothing
 * learnt, never a failure).
 */
export type ProbeOutcome = { readonly kind: "generated" } | { readonly kind: "failed"; readonly why: string } | { readonly kind: "refused"; readonly why: string } | { readonly kind: "stopped" };

/** One request of a probe; its signal ends it at the bound. */
export type ProbeOnce = (target: ProbeTarget, signal: AbortSignal) => Promise<ProbeOutcome>;

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
 * The bound is the probe's own timer (AbortSignal.timeout is a Node timer, and Node's timers run on
 * libuv's loop time, which is hrtime, not the wall clock: nodejs/node f8193ab "timers: use uv_now
 * instead of Date.now", docs.libuv.org timer.html), so the wall clock stepping never ends or
 * prolongs it. `stop`
 * aborted is "stopped", whatever the probe had seen: it says nothing of the engine.
 */
export async function probeWithin(once: ProbeOnce, target: ProbeTarget, boundMs: number, stop: AbortSignal): Promise<ProbeOutcome> {
  const bound = AbortSignal.timeout(boundMs);
  const signal = AbortSignal.any([bound, stop]);
  const noAnswer: ProbeOutcome = { kind: "failed", why: noAnswerWithin(boundMs) };
  let last = noAnswer;
  while (!signal.aborted) {
    try {
      const outcome = await once(target, signal);
      if (stop.aborted) break;
      if (outcome.kind !== "failed") return outcome;
      last = outcome;
    } catch (e) {
      if (signal.aborted) break;
      last = { kind: "failed", why: `its probe of one token failed: ${(e as Error).message}` };
    }
    await delay(PROBE_RETRY_MS, undefined, { signal }).catch(() => undefined);
  }
  if (stop.aborted) return { kind: "stopped" };
  return last === noAnswer ? noAnswer : { kind: "failed", why: `${last.why} (tried again for ${boundText(boundMs)})` };
}

/** A serving deployment as discovery reports it, with its cluster. */
export type Watched = DeploymentStatus & { readonly cluster: string };

export interface GenerationWatchDeps {
  readonly probe: ProbeOnce;
  /** The engine's key as the store holds it (the gateway's). */
  readonly engineKey: (cluster: string, deployment: string) => string | undefined;
  readonly timing: GenerationTiming;
  /** Milliseconds on a clock that never goes back (performance.now): every time the watch judges by. */
  readonly now: () => number;
  /** The wall clock (Date.now), only to show when: a wedge's since, the last generation in /metrics. */
  readonly wall: () => number;
  readonly log: (line: string) => void;
  /**
   * A deployment became wedged: it is no longer routed to (once per wedge: it is said again only
   * after it generated again). Its times are on the wall clock.
   */
  readonly onWedged?: (seen: Watched, wedged: Wedged, message: string) => void;
  /** A second probe in a row failed too: the wedge is confirmed (the supervisor's restart), once per wedge. */
  readonly onConfirmed?: (seen: Watched, wedged: Wedged, message: string) => void;
  /** A launch is first watched: what was recorded of it before (a wedge a former daemon saw) is void. */
  readonly onWatched?: (seen: Watched) => void;
  /** The watch starts: the clusters' wedges recorded before it are void (their daemon is gone). */
  readonly onStart?: () => void;
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
  /** Its confirmation was handed on (onConfirmed), until it generates again. */
  confirmed: boolean;
  probe: AbortController | undefined;
  /** Discovery polls in a row that did not show it serving: forgotten at FORGET_AFTER_POLLS. */
  missed: number;
  /** Its wedge's since on the wall clock, worked out once: each answer that shows it says the same. */
  since: { readonly mono: number; readonly wall: number } | undefined;
}

/**
 * Polls in a row a watched launch may be missing from the serving ones before it is forgotten
 * (and its wedge with it): one poll that read it unhealthy, or its node for a moment unreachable,
 * must not erase a wedge. A new launch of the name (another boot label) is anew at once.
 */
export const FORGET_AFTER_POLLS = 3;

const key = (cluster: string, deployment: string): string => `${cluster}/${deployment}`;

/** How often the watch looks for a probe due. */
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

  /** Starts probing; what was recorded of wedges before (another daemon's) is void from now. */
  start(): void {
    if (this.timer === undefined) this.deps.onStart?.();
    this.timer ??= setInterval(() => this.tick(), GENERATION_TICK_MS);
    this.timer.unref();
  }

  /**
   * One discovery snapshot: serving deployments are watched (a new launch anew); one missing from
   * the serving ones is forgotten after FORGET_AFTER_POLLS polls in a row, and not probed meanwhile.
   */
  observe(deployments: readonly Watched[]): void {
    if (this.stopping.signal.aborted) return;
    const serving = new Map(deployments.filter((d) => d.status === "serving").map((d) => [key(d.cluster, d.deployment), d]));
    for (const [k, e] of this.entries) {
      const d = serving.get(k);
      if (d !== undefined && d.boot !== e.seen.boot) this.forget(k, e);
      else if (d === undefined && ++e.missed >= FORGET_AFTER_POLLS) this.forget(k, e);
    }
    for (const [k, d] of serving) {
      const e = this.entries.get(k);
      if (e === undefined) this.watch(k, d);
      else {
        e.seen = d;
        e.missed = 0;
      }
    }
  }

  /** The watch's own clock (monotonic): what `generated`'s `after` is read on. */
  now(): number {
    return this.deps.now();
  }

  /**
   * Evidence that this deployment generates: an answer's chunk or a 200 answer with a token through
   * the gateway, or its engine's token counter going up. Stamped on the watch's own clock: now, or
   * at `after` (that clock, `now()`) for evidence known only to come after that moment (a counter
   * that went up since the scrape before), so that tokens made before a wedge never end it; never
   * before this launch was first seen serving.
   */
  generated(cluster: string, deployment: string, after?: number): void {
    if (this.stopping.signal.aborted) return;
    const e = this.entries.get(key(cluster, deployment));
    if (e === undefined) return;
    const now = this.deps.now();
    const at = after === undefined ? now : Math.max(e.state.servingSince, Math.min(after, now));
    e.state = noteGeneration(e.state, { kind: "generated", at });
    this.settle(e);
  }

  /** Time passed: probes due are sent (not to one missing from the last poll). */
  tick(): void {
    if (this.stopping.signal.aborted) return;
    const at = this.deps.now();
    for (const e of this.entries.values()) if (e.missed === 0 && probeDue(e.state, at, this.deps.timing)) this.probe(e, at);
  }

  /** The deployments wedged now, as the gateway answers for them. */
  wedged(): WedgedDeployment[] {
    return [...this.entries.values()].flatMap((e) => {
      const w = this.shown(e);
      if (w === undefined) return [];
      const { cluster, deployment, served_model, lane } = e.seen;
      return [{ cluster, deployment, served_model, ...(lane === undefined ? {} : { lane }), since: new Date(w.since).toISOString(), reason: w.why, message: wedgedMessage(deployment, w) }];
    });
  }

  /** Each wedged deployment's state in words, by `cluster/deployment` (the read API's supervision). */
  describe(): Record<string, string> {
    return Object.fromEntries(this.wedged().map((w) => [key(w.cluster, w.deployment), `wedged since ${w.since}`]));
  }

  /**
   * Stops probing: a probe in flight ends as "stopped", never a failure, and nothing is judged or
   * handed on from now; a wedge said is no longer claimed (no one watches it any more).
   */
  async stop(): Promise<void> {
    if (this.stopping.signal.aborted) return;
    this.stopping.abort();
    clearInterval(this.timer);
    await Promise.allSettled([...this.probes]);
    for (const e of this.entries.values()) if (e.said !== undefined) this.deps.onCleared?.(e.seen);
  }

  private watch(k: string, d: Watched): void {
    this.entries.set(k, { seen: d, state: startGeneration(this.deps.now()), said: undefined, confirmed: false, probe: undefined, missed: 0, since: undefined });
    this.deps.onWatched?.(d);
    this.report(d.cluster, d.deployment, { lastOk: undefined, wedged: false });
  }

  /** A monotonic time on the wall clock, for display. */
  private wallOf(t: number): number {
    return this.deps.wall() - (this.deps.now() - t);
  }

  /** Its wedge with wall-clock times, as every word of it shows. */
  private shown(e: Entry): Wedged | undefined {
    const w = wedgedOf(e.state);
    if (w === undefined) return undefined;
    if (e.since?.mono !== w.since) e.since = { mono: w.since, wall: this.wallOf(w.since) };
    return { ...w, since: e.since.wall, at: this.wallOf(w.at) };
  }

  private probe(e: Entry, at: number): void {
    const { cluster, deployment } = e.seen;
    e.state = noteGeneration(e.state, { kind: "probe-started", at });
    const own = new AbortController();
    e.probe = own;
    const target: ProbeTarget = { endpoint: e.seen.endpoint, served_model: e.seen.served_model, apiKey: this.deps.engineKey(cluster, deployment) };
    const p = probeWithin(this.deps.probe, target, this.deps.timing.boundMs, AbortSignal.any([own.signal, this.stopping.signal]))
      .then((outcome) => {
        // Stopped, or forgotten meanwhile (a new launch, no longer serving): its answer says nothing of what is watched now.
        if (outcome.kind === "stopped" || this.stopping.signal.aborted || this.entries.get(key(cluster, deployment)) !== e || own.signal.aborted) return;
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

  /** Says a wedge once when it is found, its confirmation once, and its end when it generates again. */
  private settle(e: Entry): void {
    if (this.stopping.signal.aborted) return;
    const { cluster, deployment } = e.seen;
    const w = this.shown(e);
    if (w !== undefined && e.said === undefined) {
      e.said = w;
      this.version++;
      const message = wedgedMessage(deployment, w);
      this.deps.log(`generation: ${message}; not routed to, probed again to confirm it`);
      this.deps.onWedged?.(e.seen, w, message);
    } else if (w === undefined && e.said !== undefined) {
      e.said = undefined;
      e.confirmed = false;
      this.version++;
      this.deps.log(`generation: ${deployment} generates again (no longer wedged)`);
      this.deps.onCleared?.(e.seen);
    }
    if (w?.confirmed === true && !e.confirmed) {
      e.confirmed = true;
      const message = wedgedMessage(deployment, w);
      this.deps.log(`generation: ${deployment}: a second probe failed too, the wedge is confirmed`);
      this.deps.onConfirmed?.(e.seen, w, message);
    }
    this.report(cluster, deployment, { lastOk: e.state.lastOk === undefined ? undefined : this.wallOf(e.state.lastOk), wedged: w !== undefined });
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
