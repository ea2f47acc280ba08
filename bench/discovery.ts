// How soon `launcher serve`, at its DEFAULT --poll, sees what changed on the cluster without being
// told (README: a deployment started by `launcher up` elsewhere is routable within one poll; one that
// dies turns to 503 within one poll, plus an SSH round trip). The integration tests only wait for
// these with generous bounds (a busy CI machine); the figures are measured here. Each round: `up` a
// practice deployment into a lane with the daemon not told (LAUNCHER_DAEMON=none), time from up's
// return until the gateway lists the lane as serving; then `docker kill` its head and time until a
// request to the lane gets a 503; then `down`. What a user on this machine sees, so the poll
// triggers count: the lane's switch in the local store and the request that fails upstream each
// start a poll at once (README), which is why both come well under one poll here. The gateway is
// asked every 25 ms, so each figure is that much coarse at most.
// Run as root: node --import tsx bench/discovery.ts   (BENCH_ROUNDS, default 5)
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { launcher, onHost, rigDown, rigUp, startGateway, variant, within } from "../test/integration/practice-cluster.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? "5");
/** launcher serve's default --poll (src/daemon/config.ts SERVE_DEFAULTS), in seconds, given explicitly (the test helper defaults to 1 s): the unit the README's claims are in. */
const POLL_S = 2;
process.env.LAUNCHER_USE_DIST = "1";
spawnSync("npm", ["run", "build"], { stdio: "ignore" });
const dir = mkdtempSync(path.join(tmpdir(), "launcher-bench-discovery-"));
const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const ASK_EVERY_MS = 25;

/** Asks `check` every ASK_EVERY_MS until it holds (at most `ms`); the seconds it took from `from`. */
async function until(from: number, ms: number, what: string, check: () => Promise<boolean>): Promise<number> {
  for (let i = 0; i < Math.ceil(ms / ASK_EVERY_MS); i++) {
    if (await check().catch(() => false)) return (Date.now() - from) / 1000;
    await new Promise((r) => setTimeout(r, ASK_EVERY_MS));
  }
  throw new Error(`${what}: not within ${ms} ms`);
}

try {
  await rigUp(2);
  const recipe = variant(dir, "bench-discovery", "practice-2x", `[env]\nPRACTICE_PHASE_DELAY_MS = "0"\nPRACTICE_LOAD_DELAY_MS = "0"\n`);
  const gw = await startGateway(["--poll", `${POLL_S}s`]);
  const routable: number[] = [];
  const failing: number[] = [];
  try {
    await within(30_000, "the gateway's first poll", async () => ((await fetch(`${gw.url}/health`)).ok ? true : undefined));
    for (let round = 1; round <= ROUNDS; round++) {
      const name = `bench-d${round}`;
      const lane = `lane-d${round}`;
      const up = await launcher(["up", recipe, "--name", name, "--lane", lane], 120_000, { LAUNCHER_DAEMON: "none" });
      if (up.code !== 0) throw new Error(`up failed:\n${up.stderr}`);
      const upDone = Date.now();
      routable.push(
        await until(upDone, 30_000, `${lane} routable`, async () => {
          const list = (await (await fetch(`${gw.url}/v1/models`, { signal: AbortSignal.timeout(2000) })).json()) as { data: { id: string; status?: string }[] };
          return list.data.some((m) => m.id === lane && m.status === "serving");
        }),
      );
      onHost(1, ["docker", "kill", "--", `launcher-${name}-r0`]);
      const killed = Date.now();
      failing.push(
        await until(killed, 30_000, `${lane} answering 503`, async () => {
          const r = await fetch(`${gw.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: lane, max_tokens: 1, messages: [{ role: "user", content: "hi" }] }), signal: AbortSignal.timeout(2000) });
          await r.arrayBuffer();
          return r.status === 503;
        }),
      );
      console.log(`  round ${round}: routable ${routable.at(-1)?.toFixed(3)} s after up returned; 503 ${failing.at(-1)?.toFixed(3)} s after the head was killed`);
      await launcher(["down", `deployment/${name}`, "--grace", "1"], 60_000, { LAUNCHER_DAEMON: "none" });
    }
  } finally {
    await gw.stop();
  }
  const say = (what: string, xs: readonly number[]): string => `${what} median ${median(xs).toFixed(2)} s, max ${Math.max(...xs).toFixed(2)} s (${(Math.max(...xs) / POLL_S).toFixed(2)} polls)`;
  console.log(`launcher serve at its default --poll (${POLL_S} s), ${ROUNDS} rounds on 2 practice hosts:`);
  console.log(`  ${say("a deployment up'ed elsewhere, routable:", routable)}`);
  console.log(`  ${say("a deployment whose head died, 503:     ", failing)}`);
} finally {
  await launcher(["down", "--all", "--grace", "1"], 60_000, { LAUNCHER_DAEMON: "none" }).catch(() => undefined);
  rigDown();
  rmSync(dir, { recursive: true, force: true });
}
