// The memory guard on the node itself (src/memory/node-guard.ts) against the control machine's
// guard (src/memory/guard.ts, what `up` and the daemon run), on 2 practice hosts:
// - from the crossing of the floor (the moment a process here took the memory that crossed it:
//   the hosts share this machine's kernel) to the guarded container's end on n1 (docker's
//   State.FinishedAt, the same clock): the node guard with n1's management link CUT, the control
//   machine's guard with it up (cut, it cannot kill at all). Rounds interleaved, target 250 ms;
// - the node guard's CPU while it watches (its shell and every `sleep`/`docker ps` it ran).
// Run as root, under the practice-cluster lock:
//   flock /tmp/rig.lock node --import tsx bench/node-guard.ts
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { parseCluster } from "../src/cluster/parse.js";
import { dockerOf, openSession } from "../src/nodes/session.js";
import { startGuard } from "../src/memory/guard.js";
import { NODE_GUARD_INTERVAL_SECONDS, NODE_GUARD_HOME, NODE_GUARD_MARGIN_GIB } from "../src/memory/node-guard.js";
import { startNodeGuard, stopNodeGuards } from "../src/memory/node-guard-shell.js";
import { CLUSTER, onHost, onHostRun, rigDown, rigUp } from "../test/integration/practice-cluster.js";

const ROUNDS = 6;
const IMAGE = "practice-engine:local";
const DEPLOYMENT = "ngbench";
const CONTAINER = "launcher-ngbench-r0";
const FLOOR_BELOW_GIB = 0.5;
const HOG_MIB = 1024;
const CPU_SECONDS = 10;

const availableKiB = (): number => Number(/^MemAvailable:\s+(\d+)/m.exec(readFileSync("/proc/meminfo", "utf8"))?.[1]);
const link = (state: "up" | "down"): void => void spawnSync("ip", ["link", "set", "lnchm1", state]);
const pct = (xs: readonly number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))] ?? NaN;
const describe = (xs: readonly number[]): string => (xs.length === 0 ? "none" : `median ${pct(xs, 0.5)} ms, worst ${Math.max(...xs)} ms  [${xs.join(", ")}]`);

/** Takes HOG_MIB MiB here in 64 MiB steps; resolves with the moment MemAvailable first fell below floorKiB, then holds until stopped. */
function hog(floorKiB: number): { crossed: Promise<number | undefined>; stop: () => void } {
  const code = `const fs = require("node:fs"); const held = []; let said = false;
    const avail = () => Number(/^MemAvailable:\\s+(\\d+)/m.exec(fs.readFileSync("/proc/meminfo", "utf8"))[1]);
    for (let i = 0; i < ${HOG_MIB / 64}; i++) { held.push(Buffer.alloc(64 * 1048576, 1)); if (!said && avail() < ${floorKiB}) { said = true; console.log("crossed " + Date.now()); } }
    if (!said) console.log("never");
    setInterval(() => held[0][0]++, 1000);`;
  const child = spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  const crossed = new Promise<number | undefined>((resolve) => {
    child.stdout.setEncoding("utf8").on("data", (d: string) => resolve(/crossed (\d+)/.test(d) ? Number(/crossed (\d+)/.exec(d)?.[1]) : undefined));
    child.once("exit", () => resolve(undefined));
  });
  return { crossed, stop: () => child.kill("SIGKILL") };
}

const startContainer = (): void => {
  onHost(1, ["sh", "-c", 'docker rm --force "$1" >/dev/null 2>&1; true', "sh", CONTAINER]);
  onHost(1, ["docker", "run", "--detach", "--name", CONTAINER, "--label", `launcher.deployment=${DEPLOYMENT}`, "--network", "none", "--entrypoint", "node", IMAGE, "-e", "setInterval(() => {}, 1e6)"]);
};
const finishedAt = (): number => Date.parse(onHost(1, ["docker", "inspect", "--format", "{{.State.FinishedAt}}", CONTAINER]).trim());
const until = async (check: () => boolean, ms: number): Promise<boolean> => {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) if (check()) return true;
  return false;
};

try {
  await rigUp(2);
  const parsed = parseCluster(CLUSTER, readFileSync(CLUSTER, "utf8"));
  if (parsed.cluster === undefined) throw new Error(`cannot read ${CLUSTER}`);
  const session = await openSession(parsed.cluster);
  const docker = dockerOf(session, "n1");
  const node: number[] = [];
  const control: number[] = [];
  for (let round = 0; round < ROUNDS * 2; round++) {
    const onNode = round % 2 === 0;
    startContainer();
    // Both guards kill at the same level: the node guard's is its node's floor less its margin.
    const floorGiB = availableKiB() / 1024 / 1024 - FLOOR_BELOW_GIB;
    const stop = new AbortController();
    if (onNode) {
      await startNodeGuard(docker.transport, DEPLOYMENT, floorGiB + NODE_GUARD_MARGIN_GIB);
      link("down");
    } else {
      startGuard({ nodes: [{ node: "n1", docker, floorGiB, containers: [CONTAINER] }], phaseOf: () => "serving", signal: stop.signal, onTrip: () => undefined });
      await new Promise((r) => setTimeout(r, 2000)); // its sampler stream and armed kill are open
    }
    const pressure = hog(Math.round(floorGiB * 1024 * 1024));
    const crossed = await pressure.crossed;
    await new Promise((r) => setTimeout(r, 2000));
    pressure.stop();
    link("up");
    stop.abort();
    const ended = (await until(() => onHostRun(1, ["true"]).code === 0, 60_000)) ? finishedAt() : NaN;
    if (crossed !== undefined && Number.isFinite(ended) && ended > crossed - 1000) (onNode ? node : control).push(ended - crossed);
    else console.log(`round ${round + 1} (${onNode ? "node guard" : "control guard"}): no trip measured (crossed ${crossed}, ended ${ended})`);
    await stopNodeGuards(docker.transport, [DEPLOYMENT]);
    await until(() => availableKiB() / 1024 / 1024 > floorGiB + FLOOR_BELOW_GIB - 0.2, 10_000);
  }
  console.log(`crossing -> the container's end on n1, ${ROUNDS} rounds each, interleaved (target 250 ms):`);
  console.log(`  node guard, n1's management link cut: ${describe(node)}`);
  console.log(`  control machine's guard, link up:     ${describe(control)}`);

  // The node guard's CPU while it watches: utime+stime of its shell and its waited-for children
  // (proc(5) /proc/PID/stat fields 14-17, in clock ticks of 1/100 s), over CPU_SECONDS.
  startContainer();
  await startNodeGuard(docker.transport, DEPLOYMENT, 0.001);
  const pid = onHost(1, ["sh", "-c", `cat "$HOME/${NODE_GUARD_HOME}/$1/pid"`, "sh", DEPLOYMENT]).trim();
  const ticks = (): number => readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ").slice(11, 15).reduce((s, f) => s + Number(f), 0);
  const t0 = ticks();
  await new Promise((r) => setTimeout(r, CPU_SECONDS * 1000));
  const used = (ticks() - t0) / 100;
  console.log(`node guard CPU: ${((used / CPU_SECONDS) * 100).toFixed(2)}% of one core (${used.toFixed(2)} s in ${CPU_SECONDS} s, ${1 / NODE_GUARD_INTERVAL_SECONDS} samples/s)`);
  await stopNodeGuards(docker.transport, [DEPLOYMENT]);
  console.log(`node ${process.version}, load average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}`);
} finally {
  link("up");
  rigDown();
}
