// The dashboard's speed (issue 29), in one run on the practice cluster, the page in headless
// Chromium (Debian's, driven by playwright-core) against `launcher serve --control`:
//   1. the daemon's CPU (its process's utime+stime, /proc/PID/stat) over a window with the page open
//      on a serving deployment's view and a boot on 4 nodes following their logs, against the same
//      window without the page; rounds interleaved (ABBA), so drift and the machine's other load
//      fall on both alike. Target: the page adds at most 5% of one core;
//   2. an event's latency to the page: a chat request answered through the gateway -> its row in the
//      activity table, from the answer's end at this client (and from its send, an upper bound); and
//      a boot's phase changes -> the boot view's node showing that phase, from the daemon's own
//      event time (its clock is this machine's). The DOM's time is taken in the page, as the
//      change lands (a MutationObserver; performance.timeOrigin + performance.now()). Target 250 ms;
//   3. the first view on loopback: navigation start (a fresh browser context, signed in, no cache)
//      to the overview's node rows present. Target 1 s.
// Hosts: n1-n4 hold the boot (practice-4x, slowed so that it boots through the window), n5-n6 the
// deployment the page shows (practice-2x in lane chat): 6 practice hosts, a 4-node boot.
// Run as root, under the practice cluster's lock:
//   flock /tmp/rig.lock node --import tsx bench/dashboard.ts
//   (BENCH_ROUNDS, default 4; BENCH_WINDOW_S, default 15; BENCH_SAMPLES events and views, default 20)
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { READ_PATHS, SESSION_ROUTES } from "../src/contract/read-api.js";
import { cancelBoot } from "../src/daemon/client.js";
import { buildWeb } from "../scripts/build-web.js";
import { freshPage, startBrowser } from "../test/support/browser.js";
import { launcher, launcherProcess, rigDown, rigUp, variant, within } from "../test/integration/practice-cluster.js";

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? "4");
const WINDOW_S = Number(process.env.BENCH_WINDOW_S ?? "15");
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? "20");
const HOSTS = 6;
const BOOT_NODES = "n1,n2,n3,n4";
const SERVED_NODES = "n5,n6";
const ADMIN = "admin-key-bench-dashboard-7f3a";
const BOOT = "bench-boot";
const SERVED = "bench-served";
const TARGETS = { cpuPctOfCore: 5, eventMs: 250, firstViewMs: 1000 } as const;

const dir = mkdtempSync(path.join(tmpdir(), "launcher-bench-dashboard-"));
// A boot that outlasts the window: its phases 2.5 s apart on each of its 4 nodes, each with its log lines.
const slowBoot = variant(dir, BOOT, "practice-4x", `[env]\nPRACTICE_PHASE_DELAY_MS = "2500"\nPRACTICE_LOAD_DELAY_MS = "2500"\n`);
// The boot whose phases the latency part watches: phases a little apart, to serving.
const watchedBoot = variant(dir, `${BOOT}-watched`, "practice-4x", `[env]\nPRACTICE_PHASE_DELAY_MS = "700"\nPRACTICE_LOAD_DELAY_MS = "700"\n`);
const served = variant(dir, SERVED, "practice-2x", "");

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length === 0 ? Number.NaN : s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};
const p95 = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.95))] ?? Number.NaN;
const stats = (xs: readonly number[]): string => `median ${median(xs).toFixed(0)} ms, p95 ${p95(xs).toFixed(0)} ms, max ${Math.max(...xs).toFixed(0)} ms (n=${xs.length})`;
const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const loadAvg = (): string => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

/** Clock ticks a second, as /proc/PID/stat counts CPU time (proc(5): "measured in clock ticks (divide by sysconf(_SC_CLK_TCK))"). */
const CLK_TCK = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;

/** Process `pid`'s CPU time so far in seconds: utime + stime, fields 14 and 15 of /proc/PID/stat (proc(5)); read after comm's closing parenthesis, which may hold spaces. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // fields[0] is field 3 (state): field n is fields[n - 3].
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

interface RunningDaemon {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

/** `launcher serve --control` on a free loopback port, at serve's default --poll; resolves once it listens. */
async function startDaemon(): Promise<RunningDaemon> {
  const child = launcherProcess(["serve", "--listen", "127.0.0.1:0", "--control"], { LAUNCHER_ADMIN_KEY: ADMIN, LAUNCHER_RECIPES: dir });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<void>((resolve) => child.on("close", () => resolve()));
  const { value: port } = await within(30_000, "launcher serve listening", async () => /listening on http:\/\/[\d.]+:(\d+)\/v1/.exec(stderr)?.[1]);
  if (child.pid === undefined) throw new Error("launcher serve has no pid");
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid,
    stop: async () => {
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await closed;
      clearTimeout(killer);
    },
  };
}

const ADMIN_ENV = { LAUNCHER_ADMIN_KEY: ADMIN };

async function mustRun(args: string[], what: string, timeoutMs = 180_000): Promise<void> {
  const r = await launcher(args, timeoutMs, ADMIN_ENV);
  if (r.code !== 0) throw new Error(`${what} failed (${r.code}):\n${r.stderr}`);
}

/** A boot as the read API lists it (src/contract/read-api.ts BootViewSchema): what this bench reads of it. */
interface HeldBoot {
  readonly deployment: string;
  readonly state: string;
  readonly started_at: string;
  readonly nodes: Record<string, string>;
  readonly events: readonly { readonly type: string; readonly t: number; readonly node?: string; readonly state?: { readonly phase?: string } }[];
}

/** The boots the daemon holds, read as the page reads them. */
async function boots(url: string): Promise<HeldBoot[]> {
  const res = await fetch(`${url}${READ_PATHS.boots}`, { headers: { authorization: `Bearer ${ADMIN}` } });
  return ((await res.json()) as { boots: HeldBoot[] }).boots;
}

/** The newest boot of deployment `name` the daemon holds (it keeps the finished ones of that name too). */
async function newestBoot(url: string, name: string): Promise<HeldBoot | undefined> {
  const held = (await boots(url)).filter((b) => b.deployment === name);
  return held.sort((a, b) => Date.parse(a.started_at) - Date.parse(b.started_at)).at(-1);
}

/** Submits `recipe` as deployment `name` on n1-n4 to the daemon and returns once it is accepted. */
const startBoot = (url: string, recipe: string, name: string): Promise<void> =>
  mustRun(["up", recipe, "--name", name, "--nodes", BOOT_NODES, "--daemon", url, "--detach", "--timeout", "5m"], `up ${name}`);

/** Cancels boot `name` (rolled back by the daemon) or, once ready, takes it down. */
async function endBoot(url: string, name: string): Promise<void> {
  await cancelBoot({ url, key: ADMIN }, name);
  await launcher(["down", `deployment/${name}`, "--grace", "1"], 60_000, { LAUNCHER_DAEMON: "none" });
}

/** A fresh context signed in as the admin (its cookie set by the daemon), and a page in it. */
async function signedIn(browser: Browser, url: string, initScript?: string): Promise<{ context: BrowserContext; page: Page }> {
  const { context, page } = await freshPage(browser);
  if (initScript !== undefined) await context.addInitScript({ content: initScript });
  const res = await context.request.post(`${url}${SESSION_ROUTES.signIn}`, { data: { key: ADMIN } });
  if (!res.ok()) throw new Error(`sign-in: ${res.status()}`);
  return { context, page };
}

/** One window of the daemon's CPU with a slow boot on n1-n4, the page open on the served deployment or not; its share of one core (%). */
async function cpuWindow(browser: Browser, url: string, pid: number, withPage: boolean): Promise<{ pct: number; booting: boolean; events: number }> {
  const open = withPage ? await signedIn(browser, url) : undefined;
  try {
    if (open !== undefined) {
      await open.page.goto(`${url}/#/deployments/${SERVED}`);
      await open.page.locator(`[data-testid=deployment][data-deployment=${SERVED}]`).waitFor();
    }
    await startBoot(url, slowBoot, BOOT);
    // The window starts once the boot follows all 4 nodes' logs: each node past "starting".
    await within(120_000, "the boot loading on 4 nodes", async () => {
      const b = await newestBoot(url, BOOT);
      return b?.state === "booting" && Object.keys(b.nodes).length === 4 && Object.values(b.nodes).every((p) => p !== "starting") ? true : undefined;
    });
    const c0 = cpuSeconds(pid);
    const t0 = performance.now();
    const from = Date.now();
    // The measurement's window itself: a fixed length, nothing to wait for.
    await pause(WINDOW_S * 1000);
    const pct = ((cpuSeconds(pid) - c0) / ((performance.now() - t0) / 1000)) * 100;
    const to = Date.now();
    const boot = await newestBoot(url, BOOT);
    // What the boot said in the window (its nodes' phases and figures, read from their logs): how busy the window was.
    const events = boot?.events.filter((e) => e.t >= from && e.t <= to).length ?? 0;
    return { pct, booting: boot?.state === "booting", events };
  } finally {
    await open?.context.close();
    await endBoot(url, BOOT);
  }
}

// Put in every document of a latency or first-view context before its own scripts: records, as
// each DOM change lands, when the first node row appeared (ms since navigation start), when the
// activity table grew, and when each boot node first showed each phase (epoch ms).
const OBSERVER = `(() => {
  const b = { firstNode: null, activity: [], phases: {} };
  window.__bench = b;
  const now = () => performance.timeOrigin + performance.now();
  let rows = -1;
  const look = () => {
    if (b.firstNode === null && document.querySelector('[data-testid=node]')) b.firstNode = performance.now();
    const n = document.querySelectorAll('[data-testid=activity-row]').length;
    if (rows >= 0 && n > rows && b.activity.length < 10000) b.activity.push(now());
    rows = n;
    for (const el of document.querySelectorAll('[data-testid=boot-node]')) {
      const key = el.getAttribute('data-node') + ' ' + el.getAttribute('data-phase');
      if (!(key in b.phases)) b.phases[key] = now();
    }
  };
  new MutationObserver(look).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-phase'] });
})();`;

/** A short chat request through the daemon's gateway (loopback, no inference key), read to its end. */
async function chat(url: string, content: string): Promise<void> {
  const r = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "chat", max_tokens: 4, messages: [{ role: "user", content }] }) });
  await r.text();
}

/** Chat requests through the gateway, one at a time: each one's answer end (and send) to its activity row in the page. */
async function activityLatency(browser: Browser, url: string): Promise<{ fromEnd: number[]; fromSend: number[] }> {
  const { context, page } = await signedIn(browser, url, OBSERVER);
  const fromEnd: number[] = [];
  const fromSend: number[] = [];
  try {
    await page.goto(`${url}/#/activity`);
    // One request first, shown, so that the table's first read is behind us: from here on it grows by one row a request.
    await chat(url, "warm-up");
    await page.locator("[data-testid=activity-row]").first().waitFor();
    for (let i = 0; i < SAMPLES; i++) {
      const before = (await page.evaluate("window.__bench.activity.length")) as number;
      const sent = Date.now();
      await chat(url, `bench ${i}`);
      const ended = Date.now();
      // Read through the driver (the page's CSP refuses the eval that waitForFunction needs); the time is the page's own.
      const { value: shown } = await within(10_000, `request ${i}'s row`, async () => (await page.evaluate(`window.__bench.activity[${before}]`)) as number | undefined);
      fromEnd.push(shown - ended);
      fromSend.push(shown - sent);
      await pause(200);
    }
  } finally {
    await context.close();
  }
  return { fromEnd, fromSend };
}

/** A 4-node boot watched on its boot view: each phase change's daemon event time to the page showing it. */
async function bootLatency(browser: Browser, url: string): Promise<number[]> {
  const { context, page } = await signedIn(browser, url, OBSERVER);
  try {
    const name = `${BOOT}-watched`;
    await startBoot(url, watchedBoot, name);
    await page.goto(`${url}/#/boots/${name}`);
    await page.locator(`[data-testid=boot][data-deployment=${name}]`).waitFor();
    // Only changes after the view showed the boot count: earlier ones came with its first read.
    const watching = Date.now();
    await page.locator(`[data-testid=boot][data-deployment=${name}][data-state=ready]`).waitFor({ timeout: 180_000 });
    const shown = (await page.evaluate("window.__bench.phases")) as Record<string, number>;
    const boot = await newestBoot(url, name);
    const first = new Map<string, number>();
    for (const e of boot?.events ?? []) {
      const key = `${e.node} ${e.state?.phase}`;
      if (e.type === "node" && !first.has(key)) first.set(key, e.t);
    }
    const out = [...first].flatMap(([key, t]) => (t > watching && shown[key] !== undefined ? [(shown[key] as number) - t] : []));
    await endBoot(url, name);
    return out;
  } finally {
    await context.close();
  }
}

/** The overview's first render in a fresh (cold) signed-in context: navigation start to its node rows, in ms. */
async function firstViews(browser: Browser, url: string): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const { context, page } = await signedIn(browser, url, OBSERVER);
    try {
      await page.goto(`${url}/#/`);
      await page.locator("[data-testid=node]").first().waitFor();
      out.push((await page.evaluate("window.__bench.firstNode")) as number);
    } finally {
      await context.close();
    }
  }
  return out;
}

let daemon: RunningDaemon | undefined;
let browser: Browser | undefined;
try {
  const loadBefore = loadAvg();
  await rigUp(HOSTS);
  const built = await buildWeb();
  daemon = await startDaemon();
  await mustRun(["up", served, "--lane", "chat", "--nodes", SERVED_NODES, "--daemon", daemon.url, "--timeout", "3m"], `up ${SERVED}`);
  browser = await startBrowser();
  const cpu: Record<"off" | "on", number[]> = { off: [], on: [] };
  for (let r = 0; r < ROUNDS; r++) {
    // ABBA: each setting goes first in every other round.
    for (const withPage of r % 2 === 0 ? [false, true] : [true, false]) {
      const w = await cpuWindow(browser, daemon.url, daemon.pid, withPage);
      cpu[withPage ? "on" : "off"].push(w.pct);
      console.log(`round ${r + 1} page ${withPage ? "open  " : "closed"}: daemon CPU ${w.pct.toFixed(2)} % of one core over ${WINDOW_S} s, ${w.events} boot events in it${w.booting ? "" : " (the boot ended inside the window)"}`);
    }
  }
  const activity = await activityLatency(browser, daemon.url);
  const phases = await bootLatency(browser, daemon.url);
  const views = await firstViews(browser, daemon.url);
  const deltas = cpu.on.map((on, i) => on - (cpu.off[i] as number));
  console.log(`\nnode ${process.version}, chromium ${browser.version()}, page app.js ${(built.bytes / 1024).toFixed(0)} KiB; load average before ${loadBefore}, after ${loadAvg()}`);
  console.log(`${ROUNDS} rounds (ABBA) of ${WINDOW_S} s windows; the boot on ${BOOT_NODES}, the page on ${SERVED} (${SERVED_NODES})`);
  console.log(`daemon CPU, page closed: median ${median(cpu.off).toFixed(2)} % of one core; page open: median ${median(cpu.on).toFixed(2)} %`);
  console.log(`the page adds (open - closed, per round): ${deltas.map((d) => d.toFixed(2)).join(", ")} %; median ${median(deltas).toFixed(2)} % of one core (target <= ${TARGETS.cpuPctOfCore} %)`);
  console.log(`activity row after the answer's end: ${stats(activity.fromEnd)}; after its send: ${stats(activity.fromSend)} (target ${TARGETS.eventMs} ms)`);
  console.log(`boot phase on the page after the daemon's event: ${phases.length === 0 ? "no phase change seen after the view opened" : stats(phases)} (target ${TARGETS.eventMs} ms)`);
  console.log(`first view (navigation start -> overview's node rows), cold context: ${stats(views)} (target ${TARGETS.firstViewMs} ms)`);
} finally {
  await browser?.close();
  await daemon?.stop();
  await launcher(["down", "--all", "--grace", "1"], 60_000, { LAUNCHER_DAEMON: "none" });
  rigDown();
  rmSync(dir, { recursive: true, force: true });
}
