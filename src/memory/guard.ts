import { untilReaderGoes, type ArmedKill, type Docker } from "../remote/docker.js";
import {
  describeTrip,
  nodeMemory,
  observe,
  parseSampleLine,
  SAMPLE_INTERVAL_SECONDS,
  SAMPLER_SCRIPT,
  type MemorySample,
  type NodeMemory,
  type Trip,
} from "./memory-watch.js";

/** One node the guard watches: its floor and the containers of the deployment it kills there. */
export interface GuardedNode {
  readonly node: string;
  readonly docker: Docker;
  readonly floorGiB: number;
  readonly containers: readonly string[];
}

export interface GuardOptions {
  readonly nodes: readonly GuardedNode[];
  /** The node's boot phase now: the sample is kept against it. */
  readonly phaseOf: (node: string) => string;
  /**
   * Ends the guard: every sampler loop on the nodes ends with its reader (untilReaderGoes). Not the
   * boot watch's signal: a trip in progress still needs the crossed node's next sample.
   */
  readonly signal: AbortSignal;
  readonly onSample?: (node: string, sample: MemorySample) => void;
  /** A node's lines of the fit check made before the boot, for the trip's report: read at the trip. */
  readonly fit?: (node: string) => readonly string[];
  /** The containers are killed on every node already when this is called. */
  readonly onTrip: (trip: Trip) => void;
  /** A node's sampler ended or never started: that node is not guarded any more. */
  readonly onLost?: (node: string, why: string) => void;
  /** For bench/guard.ts: per node, ms from the crossing sample's arrival to its `docker kill` returning. */
  readonly onKilled?: (timings: readonly { readonly node: string; readonly ms: number }[]) => void;
  readonly interval?: number;
  readonly now?: () => number;
}

export interface Guard {
  /** What each node's memory did so far (peaks per phase). */
  readonly states: () => readonly NodeMemory[];
  /**
   * Once a node crossed its floor: the trip's report, when the kills are done and the node's next
   * sample told whose memory it was. The killed ranks' logs end meanwhile; those ends are the
   * trip's doing, so whoever reports the boot's failure waits for this one first.
   */
  readonly tripped: () => Promise<Trip> | undefined;
  /**
   * A sample of `node` from another source: its own guard's report (src/memory/node-guard.ts),
   * which may have killed the containers before this guard's next sample. Taken as a sample of
   * the sampler's, so that a crossing trips this guard with its whole report.
   */
  readonly heard: (node: string, sample: MemorySample) => void;
}

const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

// After the kill, how long to wait for the crossed node's next sample to tell whose memory it was.
const AFTER_KILL_MS = 2000;

/**
 * Watches every node's available memory over one long-lived SSH session per node (the sampler loop
 * streams its lines; no session per sample) and, the first time any node falls below its floor,
 * kills the deployment's containers on every node at once, then reports the trip.
 */
export function startGuard(options: GuardOptions): Guard {
  const now = options.now ?? Date.now;
  const states = new Map(options.nodes.map((n) => [n.node, nodeMemory(n.node, n.floorGiB)]));
  const waiting = new Map<string, (s: MemorySample) => void>();
  let tripped: Promise<Trip> | undefined;

  // Each node's kill is made ready when its watch starts, so that a trip is a line written to an
  // open session (see SshDocker.armKill).
  const armed = new Map<string, ArmedKill>();
  options.signal.addEventListener("abort", () => armed.forEach((a) => void a.disarm()), { once: true });

  const trip = async (node: string, crossedAt: number): Promise<Trip> => {
    const results = await Promise.all(
      options.nodes.map(async (n) => {
        try {
          const ready = armed.get(n.node);
          // The armed session may have died (a node that dropped its connection): a plain kill then.
          await (ready === undefined ? n.docker.kill(n.containers) : ready.fire().catch(() => n.docker.kill(n.containers)));
          return { node: n.node, ms: now() - crossedAt };
        } catch (e) {
          return { node: n.node, ms: now() - crossedAt, error: errorText(e) };
        }
      }),
    );
    options.onKilled?.(results.map(({ node: n, ms }) => ({ node: n, ms })));
    const after = await new Promise<MemorySample | undefined>((resolve) => {
      const timer = setTimeout(() => resolve(undefined), AFTER_KILL_MS);
      waiting.set(node, (s) => {
        clearTimeout(timer);
        resolve(s);
      });
    });
    waiting.delete(node);
    const report = describeTrip(
      states.get(node) ?? nodeMemory(node, 0),
      results.filter((r) => r.error === undefined).map((r) => r.node),
      after,
      results.flatMap((r) => (r.error === undefined ? [] : [`${r.node}: ${r.error}`])),
      options.fit?.(node),
    );
    options.onTrip(report);
    return report;
  };

  // One sample of a node, from its sampler (`fromSampler`: said to onSample once kept) or heard.
  const take = (node: string, sample: MemorySample, fromSampler = false): void => {
    const at = now();
    const before = states.get(node);
    if (before === undefined) return;
    const state = observe(before, options.phaseOf(node), sample);
    states.set(node, state);
    if (fromSampler) options.onSample?.(node, sample);
    waiting.get(node)?.(sample);
    if (tripped === undefined && before.crossed === undefined && state.crossed !== undefined) tripped = trip(node, at);
  };

  const watchNode = async (n: GuardedNode): Promise<void> => {
    const argv = untilReaderGoes(["sh", "-c", SAMPLER_SCRIPT, "sh", String(options.interval ?? SAMPLE_INTERVAL_SECONDS)]);
    let samples = 0;
    if (!options.signal.aborted) armed.set(n.node, n.docker.armKill(n.containers));
    for await (const line of n.docker.transport.stream(argv, { signal: options.signal })) {
      const sample = parseSampleLine(line);
      if (sample === undefined) continue;
      samples++;
      take(n.node, sample, true);
    }
    if (!options.signal.aborted) options.onLost?.(n.node, samples === 0 ? "its sampler printed no sample" : "its sampler ended");
  };

  for (const n of options.nodes) void watchNode(n).catch((e: unknown) => options.onLost?.(n.node, errorText(e)));
  return { states: () => [...states.values()], tripped: () => tripped, heard: (node, sample) => take(node, sample) };
}
