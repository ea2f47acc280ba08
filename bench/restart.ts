// A rank's death to its group's restart issued on every node (target 1 s), with `launcher serve` at
// its DEFAULT poll, on practice hosts (engine boot delays 0). Each round boots a new deployment
// under `--restart on-failure` (so that every restart is a first one, without backoff), waits until
// the daemon supervises it as ready, `docker kill`s its last rank, and waits until the daemon says
// it serves again. The figures come from the hosts' own dockerd event logs (one machine, one
// clock): the killed container's `die`, and on each host the `create` of the new group's container
// (`docker run` issued there). Also shown: the death to the restart recorded in the store (the
// group stopped and listed, the rank that ended first named, its cause read as it is removed).
// Run as root: node --import tsx bench/restart.ts   (BENCH_NODES=2 or 4, default 2; BENCH_ROUNDS, default 5)
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Store } from "../src/store/store.js";
import { CONTROL_PATHS } from "../src/daemon/protocol.js";
import { decodeEvent } from "../src/boot/up-events.js";
import { launcher, launcherProcess, onHost, rigDown, rigUp, STATE_HOME, variant, within } from "../test/integration/practice-cluster.js";

const NODES = Number(process.env.BENCH_NODES ?? "2");
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? "5");
const TARGET_S = 1;
if (NODES !== 2 && NODES !== 4) throw new Error("BENCH_NODES is 2 or 4");
process.env.LAUNCHER_USE_DIST = "1";
spawnSync("npm", ["run", "build"], { stdio: "ignore" });
const dir = mkdtempSync(path.join(tmpdir(), "launcher-bench-restart-"));
const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const NOW_OFFSET_S = 1;

/** `launcher serve` with its default --poll, on a free loopback port. */
async function daemon(): Promise<{ url: string; stop: () => Promise<void>; log: () => string }> {
  // --control: the restart is a boot of its registry, whose events (each with the daemon's time) show where the time goes.
  const child = launcherProcess(["serve", "--listen", "127.0.0.1:0", "--control"]);
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.on("close", () => resolve()));
  const { value: port } = await within(30_000, "launcher serve listening", async () => {
    if (child.exitCode !== null) throw new Error(`launcher serve exited ${child.exitCode}: ${stderr}`);
    return /listening on http:\/\/[\d.]+:(\d+)\/v1/.exec(stderr)?.[1];
  });
  return {
    url: `http://127.0.0.1:${port}`,
    log: () => stderr,
    stop: async () => {
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(t);
    },
  };
}

/** What the daemon's supervisor says of `deployment` (its /health), e.g. "ready" or "ready (1 restart)". */
async function supervision(url: string, deployment: string): Promise<string | undefined> {
  const health = (await (await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) })).json()) as { supervision?: Record<string, string> };
  return Object.entries(health.supervision ?? {}).find(([k]) => k.endsWith(`/${deployment}`))?.[1];
}

/**
 * The restart's steps as its boot's events say them (the daemon's clock, this machine's: the same
 * as the dockerd event logs'), from `died`: "+0.312 removed 2 containers", ... up to the new
 * group's first node phase.
 */
async function timeline(url: string, deployment: string, died: number): Promise<string[]> {
  const res = await fetch(`${url}${CONTROL_PATHS.events(deployment)}`, { signal: AbortSignal.timeout(5000) });
  const out: string[] = [];
  for (const line of (await res.text()).split("\n")) {
    const e = line.trim() === "" ? undefined : decodeEvent(line);
    if (e === undefined) continue;
    const at = `+${((e.t - died) / 1000).toFixed(3)}`;
    if (e.type === "say" || e.type === "note") out.push(`${at} ${e.text.slice(0, 110)}`);
    else if (e.type === "node") {
      out.push(`${at} ${e.node} ${e.state.phase}`);
      if (out.filter((l) => / n\d+ /.test(l)).length >= NODES) break;
    }
  }
  return out;
}

/** Each host's dockerd events of `deployment` since `sinceS` (Unix seconds): [host, action, container, ms]. */
function events(deployment: string, sinceS: number): { host: number; action: string; name: string; ms: number }[] {
  const until = Math.ceil(Date.now() / 1000) + NOW_OFFSET_S;
  const out: { host: number; action: string; name: string; ms: number }[] = [];
  for (let host = 1; host <= NODES; host++) {
    const text = onHost(host, ["docker", "events", "--since", String(sinceS), "--until", String(until), "--filter", `label=launcher.deployment=${deployment}`, "--filter", "event=die", "--filter", "event=create", "--format", "{{.Action}} {{.Actor.Attributes.name}} {{.TimeNano}}"]);
    for (const line of text.split("\n")) {
      const [action, name, nano] = line.trim().split(" ");
      if (action !== undefined && name !== undefined && nano !== undefined) out.push({ host, action, name, ms: Number(BigInt(nano) / 1_000_000n) });
    }
  }
  return out;
}

function restartStartedAt(deployment: string): number | undefined {
  const store = new Store(path.join(STATE_HOME, "launcher", "launcher.db"));
  try {
    const r = store.restarts(deployment, 1)[0];
    return r === undefined ? undefined : Date.parse(r.started_at);
  } finally {
    store.close();
  }
}

try {
  await rigUp(NODES);
  const recipe = variant(dir, "bench-restart", `practice-${NODES}x`, `[env]\nPRACTICE_PHASE_DELAY_MS = "0"\nPRACTICE_LOAD_DELAY_MS = "0"\n`);
  const gw = await daemon();
  const issued: number[] = [];
  const recorded: number[] = [];
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      const name = `bench-r${round}`;
      const up = await launcher(["up", recipe, "--name", name, "--restart", "on-failure:1"], 120_000, { LAUNCHER_DAEMON: "none" });
      if (up.code !== 0) throw new Error(`up failed:\n${up.stderr}`);
      await within(30_000, `the daemon supervising ${name} as ready`, async () => ((await supervision(gw.url, name)) === "ready" ? true : undefined));
      const since = Math.floor(Date.now() / 1000) - NOW_OFFSET_S;
      const victim = `launcher-${name}-r${NODES - 1}`;
      onHost(NODES, ["docker", "kill", "--", victim]);
      await within(60_000, `${name} serving again`, async () => ((await supervision(gw.url, name)) === "ready (1 restart)" ? true : undefined));
      const seen = events(name, since);
      const died = seen.find((e) => e.action === "die" && e.name === victim)?.ms;
      if (died === undefined) throw new Error(`no die event of ${victim}: ${JSON.stringify(seen)}`);
      const created = Array.from({ length: NODES }, (_, i) => seen.find((e) => e.host === i + 1 && e.action === "create" && e.ms > died)?.ms);
      if (created.some((c) => c === undefined)) throw new Error(`not every host created the new group's container: ${JSON.stringify(seen)}`);
      const last = Math.max(...(created as number[]));
      const row = restartStartedAt(name);
      issued.push((last - died) / 1000);
      if (row !== undefined) recorded.push((row - died) / 1000);
      console.log(`  round ${round}: death -> restart recorded ${row === undefined ? "?" : ((row - died) / 1000).toFixed(3)} s, -> docker run issued on all ${NODES} nodes ${((last - died) / 1000).toFixed(3)} s`);
      console.log(`    docker run issued (create) on ${created.map((c, i) => `n${i + 1} +${(((c as number) - died) / 1000).toFixed(3)}`).join(", ")}`);
      if (process.env.BENCH_STEPS !== "0") for (const l of await timeline(gw.url, name, died).catch((e: unknown) => [`(no timeline: ${(e as Error).message})`])) console.log(`    ${l}`);
      await launcher(["down", `deployment/${name}`, "--grace", "1"], 60_000, { LAUNCHER_DAEMON: "none" });
    }
  } finally {
    await gw.stop();
  }
  console.log(`a rank's death to its group's restart, ${ROUNDS} rounds on ${NODES} practice hosts, launcher serve at its default --poll:`);
  console.log(`  to the restart recorded:            median ${median(recorded).toFixed(3)} s, max ${Math.max(...recorded).toFixed(3)} s`);
  console.log(`  to docker run issued on every node: median ${median(issued).toFixed(3)} s, max ${Math.max(...issued).toFixed(3)} s (target <= ${TARGET_S.toFixed(3)} s: ${Math.max(...issued) <= TARGET_S ? "met" : "NOT met"})`);
} finally {
  await launcher(["down", "--all", "--grace", "1"], 60_000, { LAUNCHER_DAEMON: "none" }).catch(() => undefined);
  rigDown();
  rmSync(dir, { recursive: true, force: true });
}
