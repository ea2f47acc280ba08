import assert from "node:assert/strict";
import { totalmem } from "node:os";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import { DEFAULT_MEMORY_FLOOR_GIB } from "../../src/cluster/schema.js";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { startGuard } from "../../src/memory/guard.js";
import {
  describeSample,
  describeTrip,
  KIB_PER_GIB,
  memoryFloorGiB,
  nodeMemory,
  observe,
  parseSampleLine,
  SAMPLER_SCRIPT,
  worstPeak,
  type MemorySample,
  type Trip,
} from "../../src/memory/memory-watch.js";
import { SshDocker, untilReaderGoes } from "../../src/remote/docker.js";
import { streamLocal, type ExecResult, type Transport } from "../../src/remote/transport.js";
import { PassThrough } from "node:stream";
import { within } from "../integration/practice-cluster.js";

const GIB = KIB_PER_GIB;
const sample = (availableGiB: number, totalGiB = 119.7): MemorySample => ({ totalKiB: Math.round(totalGiB * GIB), availableKiB: Math.round(availableGiB * GIB) });

test("the sampler's lines parse; anything else is no sample", () => {
  assert.deepEqual(parseSampleLine("mem 125515164 102030405"), { totalKiB: 125515164, availableKiB: 102030405 });
  assert.deepEqual(parseSampleLine("mem 125515164 102030405\r"), { totalKiB: 125515164, availableKiB: 102030405 });
  // A kernel without MemAvailable (before 3.14) leaves the field empty: no sample, not a zero.
  for (const bad of ["mem 125515164 ", "mem  ", "sh: 1: sleep: not found", "mem 10 20", "mem 0 0", "mem -1 5", "MemAvailable: 1 kB", ""]) assert.equal(parseSampleLine(bad), undefined, bad);
  assert.equal(describeSample(sample(97.3)), "mem 97.3/119.7 GiB");
});

test("the sampler loop runs in sh against this machine's /proc/meminfo", async () => {
  const samples: MemorySample[] = [];
  const started = Date.now();
  // Exactly the argv the guard sends to a node (src/memory/guard.ts), run here instead.
  const [program, ...args] = untilReaderGoes(["sh", "-c", SAMPLER_SCRIPT, "sh", "0.05"]);
  for await (const line of streamLocal(program as string, args)) {
    const s = parseSampleLine(line);
    assert.ok(s !== undefined, `not a sample: ${line}`);
    samples.push(s);
    assert.ok(Date.now() - started < 10_000, "three samples at 50 ms take well under 10 s");
    // Leaving the loop is the reader going away: streamLocal closes the loop's stdin.
    if (samples.length === 3) break;
  }
  assert.equal(samples.length, 3);
  const first = samples[0] as MemorySample;
  assert.equal(first.totalKiB, Math.floor(totalmem() / 1024), "MemTotal is what the kernel tells node too");
  assert.ok(first.availableKiB > 0 && first.availableKiB <= first.totalKiB);
});

test("a node's peak is kept per phase and the floor is crossed once, in the phase it happened", () => {
  let s = nodeMemory("n2", 4);
  s = observe(s, "starting", sample(110));
  s = observe(s, "loading", sample(60));
  s = observe(s, "loading", sample(40));
  s = observe(s, "loading", sample(50));
  assert.equal(s.crossed, undefined);
  s = observe(s, "profiling", sample(3.5));
  s = observe(s, "profiling", sample(2));
  assert.deepEqual(
    s.peaks.map((p) => [p.phase, p.minAvailableKiB / GIB]),
    [["starting", 110], ["loading", 40], ["profiling", 2]],
  );
  assert.deepEqual(s.crossed, { phase: "profiling", sample: sample(3.5) }, "the first sample below the floor is the one kept");
  assert.equal(worstPeak(s)?.phase, "profiling");
  assert.deepEqual(s.first, sample(110));
});

test("a trip names node, phase, floor, peak and the nodes killed; who held the memory is told by the sample after the kill", () => {
  let s = nodeMemory("n2", 4);
  for (const [phase, gib] of [["starting", 110], ["loading", 3]] as const) s = observe(s, phase, sample(gib));
  const ours = describeTrip(s, ["n1", "n2"], sample(100));
  assert.equal(ours.culprit, "deployment");
  assert.equal(ours.node, "n2");
  assert.equal(ours.phase, "loading");
  assert.equal(ours.message, "memory guard: n2 fell below its floor of 4.0 GiB available during loading (3.0 GiB left)");
  assert.ok(ours.detail.includes("peak: 116.7 GiB in use on n2 (everything on it) during loading"), ours.detail.join("\n"));
  assert.ok(ours.detail.includes("killed (docker kill) the deployment's containers on n1, n2"));
  assert.match(ours.hint, /--gpu-memory-utilization/);
  const outside = describeTrip(s, ["n1", "n2"], sample(2.5));
  assert.equal(outside.culprit, "outside");
  assert.match(outside.message, /held outside the deployment/);
  assert.match(outside.hint, /drop_caches/);
  assert.equal(describeTrip(s, ["n1"], undefined, ["n2: unreachable"]).culprit, "unknown");
  assert.ok(describeTrip(s, ["n1"], undefined, ["n2: unreachable"]).detail.includes("the kill failed on n2: unreachable"));
  // Without a fit check (a boot adopted by a daemon that did not make it), no fit lines.
  assert.ok(!ours.detail.some((l) => l.startsWith("the fit check")));
});

test("memory_floor: per node, else for all, else the Spark default; it must be a positive number of GiB", () => {
  const text = `memory_floor = 6\n[[nodes]]\nname = "n1"\nhost = "h1"\nmemory_floor = 2.5\n[[nodes]]\nname = "n2"\nhost = "h2"\n`;
  const c = parseCluster("c.toml", text).cluster;
  assert.ok(c !== undefined);
  assert.deepEqual(c.nodes.map((n) => memoryFloorGiB(c, n)), [2.5, 6]);
  const plain = parseCluster("c.toml", `[[nodes]]\nname = "n1"\nhost = "h1"\n`).cluster;
  assert.ok(plain !== undefined);
  assert.equal(memoryFloorGiB(plain, plain.nodes[0]), DEFAULT_MEMORY_FLOOR_GIB);
  const bad = parseCluster("c.toml", `memory_floor = -1\n[[nodes]]\nname = "n1"\nhost = "h1"\n`).diagnostics.map(formatDiagnostic).join("\n");
  assert.match(bad, /c\.toml:1/);
  assert.match(bad, /memory_floor/);
});

test("memory_floor: MiB written for GiB is refused at its file:line in GiB; at preflight a floor not below the node's MemTotal is a user error naming node, floor and total", async () => {
  const { MAX_MEMORY_FLOOR_GIB } = await import("../../src/cluster/schema.js");
  const { floorProblem, nodeFloorGiB } = await import("../../src/memory/memory-watch.js");
  const text = `memory_floor = 4\n[[nodes]]\nname = "n1"\nhost = "h1"\nmemory_floor = 4096\n`;
  const diags = parseCluster("c.toml", text).diagnostics.map(formatDiagnostic);
  assert.equal(diags.length, 1, diags.join("\n"));
  assert.match(diags[0] ?? "", /^c\.toml:5:\d+: error: nodes\[0\]\.memory_floor is in GiB and must be at most 512 GiB/);
  const top = parseCluster("c.toml", `memory_floor = 8192\n[[nodes]]\nname = "n1"\nhost = "h1"\n`).diagnostics.map(formatDiagnostic);
  assert.match(top.join("\n"), /^c\.toml:1:\d+: error: memory_floor is in GiB/);
  assert.equal(parseCluster("c.toml", `memory_floor = ${MAX_MEMORY_FLOOR_GIB}\n[[nodes]]\nname = "n1"\nhost = "h1"\n`).diagnostics.length, 0, "the bound itself is allowed");
  // Within the bound but not below this node's total (a small machine): refused before any container starts.
  const c = parseCluster("c.toml", `[[nodes]]\nname = "n1"\nhost = "h1"\nmemory_floor = 32\n[[nodes]]\nname = "n2"\nhost = "h2"\n`).cluster;
  assert.ok(c !== undefined);
  assert.equal(nodeFloorGiB(c, "n1"), 32);
  assert.equal(floorProblem("n1", nodeFloorGiB(c, "n1"), 31.2 * GIB), "n1: memory_floor 32 GiB is not below the node's total memory (MemTotal 31.2 GiB): the memory guard would kill the deployment at its first sample; set memory_floor (in GiB) well below 31.2 in the cluster file");
  assert.match(floorProblem("n1", 32, 32 * GIB) ?? "", /not below/, "equal to the total is refused too");
  assert.equal(floorProblem("n2", nodeFloorGiB(c, "n2"), 119.7 * GIB), undefined);
});

/** A node whose sampler lines the test writes, and whose commands (docker kill) it records. */
function fakeNode(node: string) {
  const lines: string[] = [];
  let wake: (() => void) | undefined;
  // Set by end(): the open sampler stream ends as a dropped SSH session does (the next one opened runs).
  let ended = false;
  const commands: string[][] = [];
  const transport: Transport = {
    node,
    exec: async (argv): Promise<ExecResult> => {
      commands.push([...argv]);
      return { code: 0, stdout: "", stderr: "" };
    },
    stream: (argv, options) => ({
      async *[Symbol.asyncIterator]() {
        commands.push([...argv]);
        ended = false;
        while (options?.signal?.aborted !== true && !ended) {
          if (lines.length === 0) await new Promise<void>((r) => ((wake = r), options?.signal?.addEventListener("abort", () => r(), { once: true })));
          while (lines.length > 0) yield lines.shift() as string;
        }
      },
    }),
    // The armed kill (SshDocker.armKill): a shell that runs docker kill on the line it reads.
    spawn: (argv) => {
      const stdin = new PassThrough();
      let input = "";
      stdin.on("data", (d: Buffer) => (input += d.toString()));
      const done = new Promise<{ code: number; stderr: string }>((resolve) =>
        stdin.on("end", () => {
          if (input !== "") commands.push(["docker", "kill", "--", ...argv.slice(4)]);
          else commands.push(["disarmed"]);
          resolve({ code: 0, stderr: "" });
        }),
      );
      return { stdin, stdout: new PassThrough(), done, kill: () => undefined };
    },
  };
  return {
    docker: new SshDocker(transport),
    commands,
    say: (s: MemorySample) => {
      lines.push(`mem ${s.totalKiB} ${s.availableKiB}`);
      wake?.();
    },
    end: () => {
      ended = true;
      wake?.();
    },
  };
}

test("the guard: one stream per node; the first crossing kills the deployment's containers on every node at once, then reports", async () => {
  const nodes = ["n1", "n2", "n3"].map((n) => ({ name: n, ...fakeNode(n) }));
  const stop = new AbortController();
  const phases: Record<string, string> = { n1: "loading", n2: "loading", n3: "loading" };
  const seen: string[] = [];
  let kills: readonly { node: string; ms: number }[] = [];
  let guard: ReturnType<typeof startGuard> | undefined;
  const tripped = new Promise<Trip>((resolve) => {
    guard = startGuard({
      nodes: nodes.map((n) => ({ node: n.name, docker: n.docker, floorGiB: 4, containers: [`launcher-x-${n.name}`] })),
      fit: (n) => [`${n}: need 100.2 GiB = weights 78.2 + KV cache 12.0 + ...`, `    has total 119.7, available 116.5 -> 16.3 to spare: ok`],
      phaseOf: (n) => phases[n] ?? "?",
      signal: stop.signal,
      onSample: (n, s) => seen.push(`${n} ${describeSample(s)}`),
      onTrip: resolve,
      onKilled: (t) => (kills = t),
    });
  });
  try {
    for (const n of nodes) n.say(sample(100));
    await new Promise((r) => setImmediate(r));
    assert.equal(guard?.tripped(), undefined, "no trip above the floor");
    nodes[1]?.say(sample(3));
    await new Promise((r) => setImmediate(r));
    const reported = guard?.tripped();
    assert.ok(reported !== undefined, "the trip is known from the crossing sample on, before its report");
    // The crossed node's next sample, after the kill (onKilled: the guard waits for it from then on): the memory came back.
    await within(5000, "the kills are done", async () => (kills.length > 0 ? true : undefined));
    nodes[1]?.say(sample(90));
    const trip = await tripped;
    assert.equal(await reported, trip);
    assert.equal(trip.node, "n2");
    assert.equal(trip.phase, "loading");
    assert.equal(trip.culprit, "deployment");
    // The fit check's figures of the node that crossed: what was expected beside what happened.
    const fitAt = trip.detail.indexOf("the fit check before the boot (GiB):");
    assert.ok(fitAt > 0, trip.detail.join("\n"));
    assert.deepEqual(trip.detail.slice(fitAt + 1), ["  n2: need 100.2 GiB = weights 78.2 + KV cache 12.0 + ...", "      has total 119.7, available 116.5 -> 16.3 to spare: ok"]);
    for (const n of nodes) {
      const streams = n.commands.filter((c) => c.includes(SAMPLER_SCRIPT));
      assert.equal(streams.length, 1, `${n.name}: one sampler session, not one per sample`);
      assert.deepEqual(n.commands.filter((c) => c[1] === "kill"), [["docker", "kill", "--", `launcher-x-${n.name}`]], n.name);
    }
    assert.deepEqual(kills.map((k) => k.node), ["n1", "n2", "n3"]);
    assert.ok(seen.includes("n2 mem 3.0/119.7 GiB"));
  } finally {
    stop.abort();
  }
});

test("history keeps each node's peak per phase: the least available memory the guard saw in it (migration 7)", async () => {
  const { Store } = await import("../../src/store/store.js");
  const s = new Store(":memory:");
  const id = s.beginBoot({ deployment: "d", recipe: "r", recipe_hash: "h", cluster: "c", served_model: "m", endpoint: "http://h:8000", nodes: ["n1"], started_at: "2026-01-01T00:00:00.000Z" });
  s.bootPhase(id, "n1", "loading", "2026-01-01T00:00:01.000Z", {});
  for (const gib of [80, 40, 60]) s.memoryPeak(id, "n1", "loading", gib * GIB, 119.7 * GIB);
  s.bootPhase(id, "n1", "kv-cache", "2026-01-01T00:00:02.000Z", {});
  s.memoryPeak(id, "n1", "kv-cache", 30 * GIB, 119.7 * GIB);
  s.bootPhase(id, "n1", "serving", "2026-01-01T00:00:03.000Z", {});
  const record = s.history(undefined, 1)[0];
  const phases = record?.phases ?? [];
  const { memoryPeaks } = await import("../../src/cli/history.js");
  assert.deepEqual(record === undefined ? [] : memoryPeaks(record), ["n1 mem 30.0/119.7 GiB (kv-cache)"], "launcher history prints each node's least");
  assert.deepEqual(
    phases.map((p) => [p.phase, p.min_available_kib === undefined ? undefined : p.min_available_kib / GIB]),
    [["loading", 40], ["kv-cache", 30], ["serving", undefined]],
  );
  s.close();
});

test("up shows each node's memory: sent as events at most once a second when the figure changes, and printed beside the phase", async () => {
  const { progressEvents, encodeEvent, decodeEvent } = await import("../../src/boot/up-events.js");
  const { progressReporter } = await import("../../src/nodes/progress.js");
  const { INITIAL_BOOT } = await import("../../src/engine/boot-log.js");
  let clock = 0;
  const events: unknown[] = [];
  const p = progressEvents((e) => events.push(e), () => clock);
  for (const [t, gib] of [[0, 97.3], [200, 97.3], [400, 90], [1200, 90], [1300, 80.04]] as const) {
    clock = t;
    p.memory?.("n1", sample(gib));
  }
  const sent = events.map((e) => decodeEvent(encodeEvent(e as Parameters<typeof encodeEvent>[0])));
  assert.deepEqual(sent.map((e) => (e?.type === "memory" ? [e.t, describeSample(e.sample)] : e?.type)), [[0, "mem 97.3/119.7 GiB"], [1200, "mem 90.0/119.7 GiB"]]);
  let out = "";
  const stream = { isTTY: false, write: (s: string) => ((out += s), true), columns: 80 } as unknown as NodeJS.WriteStream;
  const r = progressReporter(stream, () => 0);
  r.memory?.("n1", sample(97.3));
  r.node("n1", { ...INITIAL_BOOT, phase: "loading" });
  r.done();
  assert.match(out, /n1 +loading +mem 97\.3\/119\.7 GiB/);
});

test("an armed kill runs docker kill -- NAMES on the node when fired, and nothing when disarmed", async () => {
  const { mkdtempSync, writeFileSync, readFileSync, existsSync, rmSync, chmodSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const path = await import("node:path");
  const { localTransport } = await import("../../src/remote/local.js");
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-armed-"));
  const saved = process.env.PATH;
  try {
    // A docker that writes down how it was called.
    writeFileSync(path.join(dir, "docker"), `#!/bin/sh\necho "$@" >> "${dir}/calls"\n`);
    chmodSync(path.join(dir, "docker"), 0o755);
    process.env.PATH = `${dir}:${saved ?? ""}`;
    const docker = new SshDocker(localTransport("n1"));
    const fired = docker.armKill(["launcher-a-r0", "-rf"]);
    const idle = docker.armKill(["launcher-b-r0"]);
    await fired.fire();
    await idle.disarm();
    assert.equal(readFileSync(path.join(dir, "calls"), "utf8"), "kill -- launcher-a-r0 -rf\n", "only the fired one ran, names after --");
  } finally {
    process.env.PATH = saved;
    if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
  }
});

/** A status line of a deployment with one rank per node, as the daemon's discovery gives it. */
const seenServing = (nodes: readonly string[], status: "serving" | "booting" = "serving", restart?: string) => ({
  cluster: "c",
  deployment: "d",
  recipe: "r",
  recipe_hash: "h",
  engine: "vllm",
  served_model: "m",
  endpoint: "http://n1:8000",
  status,
  phase: status === "serving" ? ("serving" as const) : ("loading" as const),
  missing: [],
  unreachable: [],
  ...(restart === undefined ? {} : { restart }),
  ranks: nodes.map((n, rank) => ({ rank, node: n, container: `launcher-d-r${rank}`, state: "running" as const, started_at: "2026-01-01T00:00:00Z" })),
});

test("after ready the daemon's guard watches each serving deployment until it is gone; a trip kills it on every node, is recorded with the fit check and handed on", async () => {
  const { ReadyGuards, SERVING } = await import("../../src/supervise/ready-guard.js");
  const { Store } = await import("../../src/store/store.js");
  const { encodeSavedPlan } = await import("../../src/plan/saved.js");
  const { fileRecipeSource } = await import("../../src/recipe/fs-source.js");
  const { resolveRecipe } = await import("../../src/recipe/resolve.js");
  const { parseMeminfo } = await import("../../src/memory/meminfo.js");
  const nodes = ["n1", "n2"].map((n) => ({ name: n, ...fakeNode(n) }));
  const session = { cluster: { name: "c", nodes: [{ name: "n2", memory_floor: 6 }] }, docker: new Map(nodes.map((n) => [n.name, n.docker])) } as unknown as import("../../src/nodes/session.js").ClusterSession;
  const store = new Store(":memory:");
  // What up kept: the plan, each node's memory as its probe read it, the weights' size preflight read.
  const recipe = resolveRecipe("practice-2x", fileRecipeSource(["recipes"])).recipe;
  assert.ok(recipe);
  const node = (rank: number) => ({ rank, node: `n${rank + 1}`, container: `launcher-d-r${rank}`, labels: {}, argv: ["docker", "run", "--", "img"] });
  const plan = { deployment: "d", cluster: "c", endpoint: "http://n1:8000", served_model: "m", recipe_hash: "h", recipe, nodes: [node(0), node(1)], start_order: ["n1", "n2"], start: "head first" };
  const keepPlan = () => store.savePlan("c", "d", encodeSavedPlan(plan as unknown as import("../../src/plan/plan.js").Plan), "t");
  const meminfo = parseMeminfo("MemTotal: 125515164 kB\nMemFree: 110000000 kB\nMemAvailable: 120000000 kB\nBuffers: 0 kB\nCached: 1000000 kB\nShmem: 0 kB\nSReclaimable: 0 kB\n");
  assert.ok(meminfo.ok);
  store.saveMemory("c", new Map([["n2", meminfo.meminfo]]), "t");
  let clock = 10_000;
  const trips: [string, string, Trip][] = [];
  const logs: string[] = [];
  const guards = new ReadyGuards({ session: async () => session, store, log: (l) => logs.push(l), now: () => clock, onTrip: (c, d, t) => trips.push([c, d, t]) });
  const sampler = (n: (typeof nodes)[number]) => n.commands.filter((c) => c.includes(SAMPLER_SCRIPT)).length;
  const watchedLines = () => [...store.watchedMemory("c")].map(([n, w]) => `${n} ${w.deployment} ${describeSample(w.sample)}`);
  try {
    // A boot in progress is up's guard's to watch: nothing is started for it (observe starts a guard synchronously, its streams follow).
    guards.observe([seenServing(["n1", "n2"], "booting")]);
    assert.deepEqual(guards.watching(), []);
    guards.observe([seenServing(["n1", "n2"])]);
    guards.observe([seenServing(["n1", "n2"])]);
    assert.deepEqual(guards.watching(), ["c/d"]);
    await within(5000, "a sampler stream on each node", async () => (nodes.every((n) => sampler(n) > 0) ? true : undefined));
    // up keeps the plan once it saw the deployment ready: after the daemon's poll may have seen it serving.
    keepPlan();
    for (const n of nodes) n.say(sample(20));
    // Written for status: each node's last sample, with the deployment it is watched for.
    await within(5000, "both nodes' samples are written", async () => (watchedLines().length === 2 ? true : undefined));
    assert.deepEqual(watchedLines(), ["n1 d mem 20.0/119.7 GiB", "n2 d mem 20.0/119.7 GiB"]);
    // Both streams have carried a sample by now, so a second stream per snapshot would have opened too.
    assert.deepEqual(nodes.map(sampler), [1, 1], "one sampler stream per node, not one per snapshot");
    // n2's own floor (6 GiB) is crossed: every node's containers are killed at once.
    nodes[1]?.say(sample(5));
    await within(5000, "the guard trips", async () => (guards.tripping("c", "d") ? true : undefined));
    // The sample after the kill counts once the kills are done: sent again on each poll until the report comes.
    await within(5000, "the trip is reported", async () => {
      if (trips.length > 0) return true;
      nodes[1]?.say(sample(30));
      return undefined;
    });
    const [cluster, deployment, trip] = trips[0] ?? ["", "", undefined];
    assert.deepEqual([cluster, deployment, trip?.node, trip?.phase, trip?.culprit], ["c", "d", "n2", SERVING, "deployment"]);
    for (const n of nodes) assert.deepEqual(n.commands.filter((c) => c[1] === "kill"), [["docker", "kill", "--", `launcher-d-r${n.name === "n1" ? 0 : 1}`]], n.name);
    assert.ok(trip?.detail.includes("the fit check before the boot (GiB):"), trip?.detail.join("\n"));
    assert.ok(trip?.detail.some((l) => /^ {2}n2: need .* GiB = /.test(l)), "n2's arithmetic from what up kept");
    const kept = store.memoryTrips("c", "d", 5);
    assert.deepEqual(kept.map((t) => [t.node, t.phase, t.culprit, t.message]), [["n2", SERVING, "deployment", trip?.message]]);
    // launcher history lists it.
    const { tripLines } = await import("../../src/cli/history.js");
    assert.deepEqual(tripLines(kept), ["memory guard trips after ready (launcher serve):", `${new Date(clock).toISOString()}  d: ${trip?.message ?? ""}`]);
    assert.ok(logs.some((l) => l.includes("memory guard: d: memory guard: n2 fell below its floor of 6.0 GiB")), logs.join("\n"));
    assert.equal(guards.tripping("c", "d"), false);
    assert.deepEqual(guards.watching(), [], "the killed group is watched no more");
    // Booted again (a restart): a new group, watched anew; gone (down): not watched.
    clock += 60_000;
    guards.observe([{ ...seenServing(["n1", "n2"]), ranks: seenServing(["n1", "n2"]).ranks.map((r) => ({ ...r, started_at: "2026-01-01T01:00:00Z" })) }]);
    await within(5000, "a new sampler stream on each node", async () => (nodes.every((n) => sampler(n) === 2) ? true : undefined));
    guards.observe([]);
    assert.deepEqual(guards.watching(), []);
  } finally {
    guards.stop();
    store.close();
  }
});

test("after ready a node whose sampler stream ends (SSH dropped) is said to be not watched, watched again after a bounded backoff, and said so", async () => {
  const { ReadyGuards, WATCH_RETRY_MS } = await import("../../src/supervise/ready-guard.js");
  const { Store } = await import("../../src/store/store.js");
  const nodes = ["n1", "n2"].map((n) => ({ name: n, ...fakeNode(n) }));
  const session = { cluster: { name: "c", nodes: [] }, docker: new Map(nodes.map((n) => [n.name, n.docker])) } as unknown as import("../../src/nodes/session.js").ClusterSession;
  const store = new Store(":memory:");
  let clock = 10_000;
  const logs: string[] = [];
  // The first session attempt fails (sshd restarting), as a failed watch: tried again too.
  let sessionFails = 0;
  const guards = new ReadyGuards({
    session: async () => {
      if (sessionFails > 0) {
        sessionFails--;
        throw new Error("ssh: connect to host n1 port 22: Connection refused");
      }
      return session;
    },
    store,
    log: (l) => logs.push(l),
    now: () => clock,
    onTrip: () => assert.fail("no trip"),
  });
  const sampler = (n: (typeof nodes)[number]) => n.commands.filter((c) => c.includes(SAMPLER_SCRIPT)).length;
  const said = (what: string) => logs.filter((l) => l.includes(what)).length;
  const [n1, n2] = nodes as [(typeof nodes)[number], (typeof nodes)[number]];
  try {
    guards.observe([seenServing(["n1", "n2"])]);
    await within(5000, "a sampler stream on each node", async () => (nodes.every((n) => sampler(n) === 1) ? true : undefined));
    n1.end();
    await within(5000, "n1's loss is said", async () => (said("n1 is not watched (its sampler") === 1 ? true : undefined));
    // Within the backoff a snapshot starts nothing: one try per backoff, not one per poll.
    guards.observe([seenServing(["n1", "n2"])]);
    assert.deepEqual(nodes.map(sampler), [1, 1]);
    // Later, while it still serves: started again (the other node's stream too, as one guard).
    clock += WATCH_RETRY_MS[0] ?? 0;
    sessionFails = 1;
    guards.observe([seenServing(["n1", "n2"])]);
    // That try fails: n1 was said already; n2 is said now. Not a stream more.
    await within(5000, "the failed start is said for n2", async () => (said("n2 is not watched (ssh: connect") === 1 ? true : undefined));
    assert.equal(said("n1 is not watched"), 1, "a node is said to be not watched once, not on every try");
    assert.deepEqual(nodes.map(sampler), [1, 1]);
    guards.observe([seenServing(["n1", "n2"])]);
    assert.deepEqual(nodes.map(sampler), [1, 1], "the next try waits the next, longer step");
    clock += WATCH_RETRY_MS[1] ?? 0;
    guards.observe([seenServing(["n1", "n2"])]);
    await within(5000, "a new sampler stream on each node", async () => (nodes.every((n) => sampler(n) === 2) ? true : undefined));
    n1.say(sample(50));
    n2.say(sample(50));
    await within(5000, "both are said to be watched again", async () => (said("n1 is watched again") === 1 && said("n2 is watched again") === 1 ? true : undefined));
    assert.deepEqual(guards.watching(), ["c/d"]);
    // Dropped again much later: watched again after the first (short) step, the backoff began anew.
    n2.end();
    await within(5000, "n2's second loss is said", async () => (said("n2 is not watched (its sampler") === 1 ? true : undefined));
    clock += WATCH_RETRY_MS[0] ?? 0;
    guards.observe([seenServing(["n1", "n2"])]);
    await within(5000, "a third sampler stream on each node", async () => (nodes.every((n) => sampler(n) === 3) ? true : undefined));
    // Gone (down): not watched, and no try after it.
    n1.end();
    guards.observe([]);
    clock += 60_000;
    guards.observe([]);
    assert.deepEqual(guards.watching(), []);
    assert.deepEqual(nodes.map(sampler), [3, 3]);
  } finally {
    guards.stop();
    store.close();
  }
});

test("supervisor: a guard trip after ready is a failure that restarts the group under --restart on-failure, named as the trip (not as the ranks it killed)", async () => {
  const { Supervisor } = await import("../../src/supervise/supervisor.js");
  const { BootRegistry } = await import("../../src/supervise/boots.js");
  const { Store } = await import("../../src/store/store.js");
  const { encodeSavedPlan } = await import("../../src/plan/saved.js");
  const store = new Store(":memory:");
  const plan = { deployment: "d", cluster: "c", endpoint: "http://n1:8000", served_model: "m", recipe_hash: "h", recipe: { id: "r", engine: "vllm", docker_image: "img" }, nodes: [{ rank: 0, node: "n1", container: "launcher-d-r0", labels: {}, argv: ["docker", "run", "--label", "launcher.boot=b", "--", "img"] }], start_order: ["n1"], start: "head first" };
  store.savePlan("c", "d", encodeSavedPlan(plan as unknown as import("../../src/plan/plan.js").Plan), "t");
  const b = { deployment: "d", recipe: "r", recipe_hash: "h", cluster: "c", served_model: "m", endpoint: "http://n1:8000", nodes: ["n1"] };
  store.deploymentReady({ ...b, boot_id: store.beginBoot({ ...b, started_at: "t" }), ready_at: "t" });
  const n1 = fakeNode("n1");
  const session = { cluster: { name: "c", nodes: [] }, docker: new Map([["n1", n1.docker]]) } as unknown as import("../../src/nodes/session.js").ClusterSession;
  let tripping = false;
  const logs: string[] = [];
  const observed: number[] = [];
  const boots: string[] = [];
  let clock = 1000;
  const sup = new Supervisor({
    store,
    session: async () => session,
    boot: async (p, _session, _signal, _emit, _detach, recreating) => {
      // As up does: its first container starts once the old group is removed.
      await recreating;
      boots.push(p.deployment);
      return { status: "ready", endpoint: p.endpoint, served_model: p.served_model, seconds: 1, boot: "b", deployment: p.deployment };
    },
    boots: new BootRegistry(() => clock),
    refresh: () => undefined,
    log: (l) => logs.push(l),
    now: () => clock,
    timing: { confirmMs: 0, backoffMs: 1000, maxBackoffMs: 8000, resetAfterMs: 600_000 },
    memory: { observe: (ds) => observed.push(ds.length), tripping: () => tripping, stop: () => undefined },
  });
  const seen = { ...seenServing(["n1"], "serving", "on-failure") };
  try {
    sup.observe([seen], clock);
    assert.deepEqual(observed, [1], "the guards see every snapshot the supervisor sees");
    assert.equal(sup.describe()["c/d"], "ready");
    // The guard is killing the group: docker's deaths of its ranks are the trip's doing.
    tripping = true;
    clock += 100;
    sup.died("c", { deployment: "d", node: "n1", failure: { kind: "rank-exited", rank: 0, node: "n1", container: "launcher-d-r0", message: "rank 0 on n1 exited (exit 137)" } });
    sup.observe([{ ...seen, status: "degraded", ranks: seen.ranks.map((r) => ({ ...r, state: "exited" as const, exit_code: 137 })) }], clock);
    assert.equal(sup.describe()["c/d"], "ready", "no restart for the killed ranks while the trip is reported");
    tripping = false;
    clock += 100;
    sup.memoryTripped("c", "d", { node: "n1", message: "memory guard: n1 fell below its floor of 4.0 GiB available during serving (3.0 GiB left)" });
    await within(10_000, "the restart's boot ran", async () => (boots.length > 0 ? true : undefined)).catch((e: Error) => assert.fail(`${e.message}\n${logs.join("\n")}`));
    await sup.idle();
    const row = store.restarts("d", 5)[0];
    assert.equal(row?.reason, "memory-guard");
    assert.equal(row?.message, "memory guard: n1 fell below its floor of 4.0 GiB available during serving (3.0 GiB left)");
    assert.equal(row?.outcome, "ready");
  } finally {
    await sup.stop();
    store.close();
  }
});

test("status shows each running rank's node memory where the daemon's guard watches that deployment, and nothing stale or another's", async () => {
  const { statusLines } = await import("../../src/cli/status.js");
  const { WATCHED_FRESH_MS } = await import("../../src/supervise/ready-guard.js");
  const now = new Date("2026-01-01T12:00:00Z");
  const at = (agoMs: number) => new Date(now.getTime() - agoMs).toISOString();
  const d = seenServing(["n1", "n2", "n3"]);
  const watched = new Map([
    ["n1", { deployment: "d", sample: sample(97.3), at: at(1000) }],
    ["n2", { deployment: "d", sample: sample(50), at: at(WATCHED_FRESH_MS + 1) }],
    ["n3", { deployment: "other", sample: sample(10), at: at(0) }],
  ]);
  const lines = statusLines([d], undefined, watched, now);
  assert.equal(lines[1], "  rank 0  n1         running  launcher-d-r0  mem 97.3/119.7 GiB");
  assert.equal(lines[2], "  rank 1  n2         running  launcher-d-r1");
  assert.equal(lines[3], "  rank 2  n3         running  launcher-d-r2");
  assert.deepEqual(statusLines([d]), statusLines([d], undefined, new Map(), now), "no daemon: no memory");
});
