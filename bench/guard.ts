// The memory guard's speed and cost on 4 practice hosts:
// - from the sample that crosses the floor to `docker kill` done on every node: the median and the
//   worst over repeated trips (target: under 500 ms at 4 nodes);
// - the sampler's cost while it watches: bytes per second per node on the wire (the host side of
//   each practice host's management link, SSH framing and TCP included) and the CPU of the loop.
// A trip is forced by a floor above what is available, so the first sample crosses it.
// Run as root, under the practice-cluster lock:
//   flock /tmp/launcher-rig.flock npx tsx bench/guard.ts
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { parseCluster } from "../src/cluster/parse.js";
import { openSession, dockerOf } from "../src/nodes/session.js";
import { startGuard, type GuardedNode } from "../src/memory/guard.js";
import { SAMPLE_INTERVAL_SECONDS, SAMPLER_SCRIPT } from "../src/memory/memory-watch.js";
import { CLUSTER, onHost, rigDown, rigUp } from "../test/integration/practice-cluster.js";

const NODES = 4;
const TRIPS = 15;
const WATCH_SECONDS = 20;
const IMAGE = "practice-engine:local";

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};
const linkBytes = (i: number): number =>
  ["rx_bytes", "tx_bytes"].reduce((sum, f) => sum + Number(readFileSync(`/sys/class/net/lnchm${i}/statistics/${f}`, "utf8")), 0);

try {
  await rigUp(NODES);
  const parsed = parseCluster(CLUSTER, readFileSync(CLUSTER, "utf8"));
  if (parsed.cluster === undefined) throw new Error(`cannot read ${CLUSTER}`);
  const session = await openSession(parsed.cluster);
  const names = session.cluster.nodes.map((n) => n.name);
  // A container per node that just waits, as a deployment's would, killed by each trip.
  const container = (node: string): string => `launcher-guardbench-${node}`;
  const startContainers = (): void => {
    names.forEach((node, i) => {
      onHost(i + 1, ["sh", "-c", 'docker rm --force "$1" >/dev/null 2>&1; true', "sh", container(node)]);
      onHost(i + 1, ["docker", "run", "--detach", "--name", container(node), "--label", "launcher.deployment=guardbench", "--network", "none", "--entrypoint", "node", IMAGE, "-e", "setInterval(() => {}, 1e6)"]);
    });
  };
  const guarded = (floorGiB: number): GuardedNode[] => names.map((node) => ({ node, docker: dockerOf(session, node), floorGiB, containers: [container(node)] }));

  // Cost: the guard watching 4 nodes with a floor nobody crosses.
  {
    const stop = new AbortController();
    let samples = 0;
    startGuard({ nodes: guarded(0.001), phaseOf: () => "serving", signal: stop.signal, onSample: () => samples++, onTrip: () => undefined });
    await new Promise((r) => setTimeout(r, 3000)); // the sessions are open
    const before = names.map((_, i) => linkBytes(i + 1));
    const s0 = samples;
    await new Promise((r) => setTimeout(r, WATCH_SECONDS * 1000));
    const perNode = names.map((_, i) => (linkBytes(i + 1) - (before[i] as number)) / WATCH_SECONDS);
    stop.abort();
    console.log(`sampler: ${((samples - s0) / WATCH_SECONDS / NODES).toFixed(1)} samples/s per node (interval ${SAMPLE_INTERVAL_SECONDS} s)`);
    console.log(`sampler wire bytes/s per node (SSH+TCP, both ways): ${perNode.map((b) => b.toFixed(0)).join(", ")}`);
  }
  // The loop's CPU: the same script, on this machine's kernel, for WATCH_SECONDS; `times` prints
  // the user and system time of the shell's children (POSIX times).
  {
    const r = spawnSync("sh", ["-c", `timeout ${WATCH_SECONDS} sh -c "$1" sh ${SAMPLE_INTERVAL_SECONDS} >/dev/null; times`, "sh", SAMPLER_SCRIPT], { encoding: "utf8" });
    const lines = r.stdout.trim().split("\n");
    const toS = (t: string): number => {
      const m = /(\d+)m([\d.]+)s/.exec(t);
      return m === null ? 0 : Number(m[1]) * 60 + Number(m[2]);
    };
    const [user, sys] = (lines[1] ?? "").split(/\s+/).map(toS);
    console.log(`sampler loop CPU: ${((((user ?? 0) + (sys ?? 0)) / WATCH_SECONDS) * 100).toFixed(2)} % of one core (user ${user ?? 0} s + sys ${sys ?? 0} s over ${WATCH_SECONDS} s)`);
  }

  // Trips: each from the crossing sample to the kill done on all 4 nodes.
  const worst: number[] = [];
  for (let t = 0; t < TRIPS; t++) {
    startContainers();
    const stop = new AbortController();
    const timings = await new Promise<readonly { node: string; ms: number }[]>((resolve) => {
      startGuard({ nodes: guarded(1e6), phaseOf: () => "loading", signal: stop.signal, onTrip: () => undefined, onKilled: resolve });
    });
    stop.abort();
    const ms = Math.max(...timings.map((x) => x.ms));
    worst.push(ms);
    const running = names.flatMap((node, i) => onHost(i + 1, ["docker", "ps", "--quiet", "--filter", `name=${container(node)}`]).trim() === "" ? [] : [node]);
    if (running.length > 0) throw new Error(`trip ${t + 1}: still running on ${running.join(", ")}`);
    console.log(`trip ${String(t + 1).padStart(2)}: kill done on all ${NODES} nodes ${ms} ms after the crossing sample (${timings.map((x) => `${x.node} ${x.ms}`).join(", ")})`);
  }
  console.log(`crossing sample -> kill done on every node (${NODES} nodes, ${TRIPS} trips): median ${median(worst)} ms, worst ${Math.max(...worst)} ms (target < 500 ms)`);
  names.forEach((node, i) => onHost(i + 1, ["sh", "-c", 'docker rm --force "$1" >/dev/null 2>&1; true', "sh", container(node)]));
} finally {
  rigDown();
}
