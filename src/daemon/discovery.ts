import { spawn, type ChildProcess } from "node:child_process";
import { readLines } from "../remote/lines.js";
import { decodeStatusLine, type StatusLine } from "../contract/deployment.js";
import type { Stranger } from "../claims/ownership.js";

/**
 * The longest status line a watcher may print: one JSON line holds every deployment of a cluster
 * with its nodes (a few KiB each), so this is far above any real cluster, and a line past it (labels
 * a node made huge) is cut, fails to decode and is said, rather than held whole.
 */
const STATUS_LINE_MAX = 8 * 1024 * 1024;
import type { KnownDeployment } from "../gateway/routes.js";
import type { Staleness } from "../gateway/server.js";
import { NO_FACTS, NO_OUTAGES, ranText, stepOutages, type NodeFacts, type NodeOutage, type OutageTrack } from "../nodes/outage.js";
import { outageWords } from "../contract/outage.js";

/** Where the daemon keeps node outages (src/daemon/outages.ts: the store), and what it knows of a node beyond a poll. */
export interface OutageHooks {
  readonly facts: NodeFacts;
  started(o: NodeOutage): void;
  ended(o: NodeOutage, at: string): void;
}

export interface Snapshot {
  /** What launcher launched (see `Vouch`): routed and supervised. */
  readonly deployments: readonly KnownDeployment[];
  /** Containers that name a deployment but are not its launch: reported only. */
  readonly strangers: readonly Stranger[];
  readonly unreachable: readonly string[];
  /** Nodes that stopped answering while launcher's ranks ran there, open now. */
  readonly outages?: readonly NodeOutage[];
  /** When the oldest of the clusters' last polls finished; undefined before the first. */
  readonly at?: Date;
}

/** One cluster, watched by a `launcher status --watch --json` process started with `argv`. */
export interface WatchSource {
  readonly cluster: string;
  readonly argv: readonly string[];
}

type Poll = StatusLine;

/**
 * Why a group of containers the labels show is not launcher's launch of its deployment
 * (src/claims/ownership.ts strangerReason against the store); undefined: it is. Without one,
 * every group counts.
 */
export type Vouch = (d: KnownDeployment) => string | undefined;

/**
 * Beyond this, a watcher that printed nothing is stalled. One poll of `status --watch` takes an
 * SSH round trip per node, bounded by the 20 s timeout of the container listing
 * (src/remote/docker.ts) plus the engines' 2 s health check and the head's log read
 * (src/nodes/status.ts): so three polls apart plus 30 s.
 */
export function staleAfterMs(pollMs: number): number {
  return 3 * pollMs + 30_000;
}

/** A stalled watcher gets this long after SIGTERM (it may be inside a hung poll) before SIGKILL. */
const KILL_GRACE_MS = 2000;

const describe = (d: KnownDeployment): string => `${d.deployment} ${d.status}${d.status === "booting" ? ` (${d.phase})` : ""}`;

/**
 * Keeps the gateway's picture of every cluster's labels fresh. The polling runs in a separate
 * `launcher status --watch` process per cluster: each poll starts ssh clients, and starting a
 * process from the gateway's own (larger) process would stall every stream it serves for
 * milliseconds at a time.
 */
export class Discovery {
  private current: Snapshot = { deployments: [], strangers: [], unreachable: [] };
  private readonly polls = new Map<string, Poll>();
  private readonly children = new Map<string, ChildProcess>();
  private stopped = false;
  private firstWaiters: (() => void)[] = [];
  /** When each cluster's last poll arrived. */
  private readonly heard = new Map<string, number>();
  /** When each watcher last printed anything, or started. */
  private readonly lastOutput = new Map<string, number>();
  private readonly staleClusters = new Set<string>();
  private startedAt = Date.now();
  private checker: NodeJS.Timeout | undefined;

  private readonly sources: WatchSource[];
  private started = false;
  private outageTrack: OutageTrack = NO_OUTAGES;

  constructor(
    sources: readonly WatchSource[],
    private readonly log: (line: string) => void,
    /** A view older than this is stale, and a watcher silent this long is restarted. */
    private readonly staleAfter: number,
    private readonly vouch?: Vouch,
    private readonly outageHooks?: OutageHooks,
  ) {
    this.sources = [...sources];
  }

  /** One more cluster to watch from now on (one a remote client's `up` brought); a known one is left as it is. */
  add(source: WatchSource): void {
    if (this.sources.some((s) => s.cluster === source.cluster)) return;
    this.sources.push(source);
    if (this.started && !this.stopped) this.watch(source, 0);
  }

  /**
   * Stops watching a cluster (an uploaded one replaced or forgotten): its watcher is stopped and
   * not restarted, and its deployments leave the snapshot now.
   */
  remove(cluster: string): void {
    const i = this.sources.findIndex((s) => s.cluster === cluster);
    if (i >= 0) this.sources.splice(i, 1);
    const child = this.children.get(cluster);
    this.children.delete(cluster);
    child?.kill("SIGTERM");
    this.heard.delete(cluster);
    this.staleClusters.delete(cluster);
    if (this.polls.delete(cluster)) this.publish();
  }

  /** The cluster's watcher started anew from `source` (its file was replaced). */
  replace(source: WatchSource): void {
    this.remove(source.cluster);
    this.add(source);
  }

  snapshot(): Snapshot {
    return this.current;
  }

  private readonly listeners = new Set<(s: Snapshot) => void>();

  /** Calls `f` with each new snapshot as it arrives (the supervisor acts on a poll at once); returns the unsubscribe. */
  subscribe(f: (s: Snapshot) => void): () => void {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  }

  start(): void {
    this.started = true;
    this.startedAt = Date.now();
    for (const s of this.sources) this.watch(s, 0);
    // A watcher that is alive but prints nothing (a hung ssh, a stopped process) never exits,
    // so the restart on exit below never happens: look for silence instead.
    this.checker = setInterval(() => this.checkFreshness(), Math.min(1000, Math.max(50, this.staleAfter / 4)));
    this.checker.unref();
  }

  /** undefined while every cluster was heard from within the bound. */
  staleness(now = Date.now()): Staleness | undefined {
    const ages = this.sources.map((s) => ({ cluster: s.cluster, age: now - (this.heard.get(s.cluster) ?? this.startedAt) }));
    const stale = ages.filter((a) => a.age > this.staleAfter);
    if (stale.length === 0) return undefined;
    return { ageSeconds: Math.round(Math.max(...ages.map((a) => a.age)) / 1000), clusters: stale.map((a) => a.cluster) };
  }

  private checkFreshness(): void {
    if (this.stopped) return;
    const now = Date.now();
    const stale = new Set(this.staleness(now)?.clusters ?? []);
    for (const s of this.sources) {
      const age = Math.round((now - (this.heard.get(s.cluster) ?? this.startedAt)) / 1000);
      if (stale.has(s.cluster) && !this.staleClusters.has(s.cluster)) {
        this.staleClusters.add(s.cluster);
        this.log(`discovery of ${s.cluster} is stale: nothing read for ${age} s (more than ${Math.round(this.staleAfter / 1000)} s); routing on what was last seen`);
      } else if (!stale.has(s.cluster) && this.staleClusters.delete(s.cluster)) {
        this.log(`discovery of ${s.cluster} is fresh again`);
      }
      const child = this.children.get(s.cluster);
      const silent = now - (this.lastOutput.get(s.cluster) ?? now);
      if (child !== undefined && child.exitCode === null && child.signalCode === null && silent > this.staleAfter) {
        this.log(`discovery of ${s.cluster}: its watcher (pid ${child.pid ?? "?"}) printed nothing for ${Math.round(silent / 1000)} s; stopping it to start a new one`);
        this.lastOutput.set(s.cluster, now);
        child.kill("SIGTERM");
        setTimeout(() => {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
        }, KILL_GRACE_MS).unref();
      }
    }
  }

  /** Resolves once every cluster has been read once, or after `timeoutMs`. */
  ready(timeoutMs: number): Promise<void> {
    if (this.polls.size === this.sources.length) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.firstWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Cuts the wait short: something looked wrong (or a lane changed), look again now. */
  refreshSoon(): void {
    for (const c of this.children.values()) c.stdin?.write("\n");
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.checker);
    await Promise.all(
      [...this.children.values()].map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            c.once("close", () => resolve());
            c.kill("SIGTERM");
          }),
      ),
    );
  }

  private watch(source: WatchSource, restarts: number): void {
    const [program, ...args] = source.argv;
    const child = spawn(program as string, args, { stdio: ["pipe", "pipe", "pipe"] });
    this.children.set(source.cluster, child);
    this.lastOutput.set(source.cluster, Date.now());
    child.stdin.on("error", () => undefined);
    child.stdout.on("data", () => this.lastOutput.set(source.cluster, Date.now()));
    let healthy = false;
    readLines(
      child.stdout,
      (line) => {
        // A watcher removed (its cluster replaced or forgotten) may still print while it ends.
        if (this.children.get(source.cluster) !== child) return;
        try {
          this.update(source.cluster, decodeStatusLine(line));
          healthy = true;
        } catch (e) {
          this.log(`discovery of ${source.cluster}: unreadable line (${(e as Error).message}): ${line.slice(0, 200)}`);
        }
      },
      () => undefined,
      STATUS_LINE_MAX,
    );
    readLines(child.stderr, (line) => this.log(`discovery of ${source.cluster}: ${line}`), () => undefined);
    let ended = false;
    const onEnd = (code: number | null): void => {
      if (ended || this.stopped) return;
      ended = true;
      if (this.children.get(source.cluster) !== child) return;
      // Bounded back-off: 1 s, 2 s, ... 30 s between restarts of a watcher that keeps failing;
      // one that worked for a while starts anew.
      const wait = healthy ? 1000 : Math.min(30_000, 1000 * 2 ** Math.min(restarts, 5));
      this.log(`discovery of ${source.cluster} stopped (exit ${code}); restarting in ${wait / 1000} s`);
      setTimeout(() => {
        if (!this.stopped) this.watch(source, healthy ? 0 : restarts + 1);
      }, wait).unref();
    };
    child.on("close", onEnd);
    // A failed spawn (EAGAIN, EMFILE) is logged and retried like an exit, never a crash.
    child.on("error", (e) => {
      this.log(`discovery of ${source.cluster} could not start: ${e.message}`);
      onEnd(null);
    });
  }

  private update(cluster: string, poll: Poll): void {
    this.polls.set(cluster, poll);
    this.heard.set(cluster, Date.now());
    this.stepOutages(cluster, poll);
    this.publish();
  }

  /** One line when a node's outage begins and one when it ends; the store keeps both. */
  private stepOutages(cluster: string, poll: Poll): void {
    const step = stepOutages(this.outageTrack, cluster, poll, new Date(), this.outageHooks?.facts ?? NO_FACTS);
    this.outageTrack = step.track;
    for (const o of step.started) {
      this.log(`! node ${cluster}/${outageWords(o)}: it stopped answering while it ran ${ranText(o.deployments)}`);
      this.outageHooks?.started(o);
    }
    for (const { outage: o, ended_at } of step.ended) {
      const lasted = Math.round((Date.parse(ended_at) - Date.parse(o.since)) / 1000);
      this.log(`+ node ${cluster}/${o.node} answers again at ${ended_at}, after ${lasted} s ${o.kind} (since ${o.since}); its containers were read again in this poll`);
      this.outageHooks?.ended(o, ended_at);
    }
  }

  private publish(): void {
    const all = [...this.polls];
    const open = [...this.outageTrack.open.values()].filter((o) => this.polls.has(o.cluster));
    const notes = (c: string, d: { readonly unreachable: readonly string[] }) =>
      open.filter((o) => o.cluster === c && d.unreachable.includes(o.node)).map(({ node, kind, since, memory }) => ({ node, kind, since, ...(memory === undefined ? {} : { memory }) }));
    const seen = all.flatMap(([c, p]) =>
      p.deployments.map((d): KnownDeployment => {
        const outages = notes(c, d);
        return { ...d, cluster: c, ...(outages.length === 0 ? {} : { outages }) };
      }),
    );
    const verdicts = seen.map((d) => ({ d, reason: this.vouch?.(d) }));
    const next: Snapshot = {
      deployments: verdicts.flatMap((v) => (v.reason === undefined ? [v.d] : [])),
      strangers: verdicts.flatMap(({ d, reason }) => (reason === undefined ? [] : [{ cluster: d.cluster, deployment: d.deployment, ...(d.boot === undefined ? {} : { boot: d.boot }), reason }])),
      unreachable: all.flatMap(([c, p]) => p.unreachable.map((n) => `${c}/${n}`)),
      ...(open.length === 0 ? {} : { outages: open }),
      ...(all.length === 0 ? {} : { at: new Date(Math.min(...all.map(([, p]) => Date.parse(p.at)))) }),
    };
    this.report(this.current, next);
    this.current = next;
    for (const f of this.listeners) f(next);
    if (this.polls.size === this.sources.length) {
      for (const w of this.firstWaiters.splice(0)) w();
    }
  }

  private report(before: Snapshot, after: Snapshot): void {
    const key = (d: KnownDeployment): string => `${d.cluster}/${d.deployment}`;
    const old = new Map(before.deployments.map((d) => [key(d), d]));
    const now = new Map(after.deployments.map((d) => [key(d), d]));
    for (const [k, d] of now) {
      const was = old.get(k);
      if (was === undefined) this.log(`+ ${describe(d)}: model ${d.served_model}${d.lane === undefined ? "" : `, lane ${d.lane}`} at ${d.endpoint}`);
      else if (describe(was) !== describe(d)) this.log(`~ ${describe(d)}${d.missing.length > 0 ? `: missing ${d.missing.join("; ")}` : ""}`);
    }
    for (const [k, d] of old) if (!now.has(k)) this.log(`- ${d.deployment} gone`);
    for (const n of after.unreachable) if (!before.unreachable.includes(n)) this.log(`! ${n} unreachable`);
    const strangerKey = (x: Stranger): string => `${x.cluster}/${x.deployment}/${x.boot ?? ""}`;
    const known = new Set(before.strangers.map(strangerKey));
    for (const x of after.strangers) {
      if (!known.has(strangerKey(x))) this.log(`! ${x.cluster}/${x.deployment}: containers not launched by launcher are ignored (not routed, not supervised): ${x.reason}`);
    }
  }
}
