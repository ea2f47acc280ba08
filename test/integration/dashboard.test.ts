import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { Browser, Page } from "playwright-core";
import { CONTROL_PATHS } from "../../src/daemon/protocol.js";
import { BOOT_PHASES, type BootPhase } from "../../src/contract/deployment.js";
import { READ_PATHS, SESSION_ROUTES } from "../../src/contract/read-api.js";
import { CSRF_HEADER } from "../../src/daemon/web-session.js";
import { freshPage, screenshot, startBrowser } from "../support/browser.js";
import { launcher, launcherContainers, launcherProcess, ok, practiceSuite, startGateway, variant, within, type Daemon } from "./practice-cluster.js";

// The dashboard in a real browser (headless Debian chromium through playwright-core) against a
// daemon (`launcher serve --control`) on the practice cluster of 4 hosts: boots are submitted to
// it as `launcher up --daemon` does, and the page is read only through its DOM contract
// (data-testid and data-* attributes holding the contract's values). Each view's screenshot goes
// to test/support/browser.ts SCREENSHOTS. The practice engine stands in for vLLM.
const dir = practiceSuite(4, "launcher-dashboard-");
// Lane chat serves on n1 and n2 for as long as the file runs; each other boot runs on n3 and n4.
const SPARE = ["--nodes", "n3,n4"];
const ADMIN = "admin-key-dash-5c1e";
const INFERENCE = "inference-key-dash-90ab";
// The daemon's gateway has an inference key: it boots only recipes whose engine demands one of its own.
const recipe = (name: string, body = ""): string => variant(dir, name, "practice-2x", `[env]\nVLLM_API_KEY = "engine-key-${name}"\n${body}`);

let daemon: Daemon;
let browser: Browser;



const up = (args: string[]) => launcher(["up", ...args, "--daemon", daemon.url, "--timeout", "2m"], 180_000, { LAUNCHER_ADMIN_KEY: ADMIN });
const down = (name: string) => launcher(["down", `deployment/${name}`, "--grace", "1"], 60_000, { LAUNCHER_DAEMON: "none" });
const containersOf = (name: string): string[] => launcherContainers(4).filter((c) => c.includes(`launcher-${name}-`));

/** Lane `chat` serves `dash-chat`: booted through the daemon unless it serves already. */
async function chatServes(): Promise<string> {
  const name = "dash-chat";
  const listed = await fetch(`${daemon.url}${READ_PATHS.deployments}`, { headers: { authorization: `Bearer ${INFERENCE}` } });
  const body = (await listed.json()) as { deployments: { deployment: string; status: string }[] };
  if (!body.deployments.some((d) => d.deployment === name && d.status === "serving")) ok(await up([recipe(name), "--lane", "chat", "--nodes", "n1,n2"]), "up dash-chat on lane chat");
  return name;
}

/** A streamed chat request through the daemon's gateway with the inference key (the activity log times a stream's first token); its status. */
async function chat(maxTokens = 8): Promise<number> {
  const r = await fetch(`${daemon.url}/v1/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${INFERENCE}`, "content-type": "application/json" }, body: JSON.stringify({ model: "chat", messages: [{ role: "user", content: "hello" }], max_tokens: maxTokens, stream: true }) });
  await r.text();
  return r.status;
}

/** Signs the page in with `key` through the sign-in form; the role the page then shows. */
async function signIn(page: Page, key: string): Promise<string | null> {
  await page.goto(`${daemon.url}/`);
  await page.locator("form#sign-in").waitFor();
  await page.fill("input#key", key);
  await page.locator("form#sign-in [type=submit]").click();
  const role = page.locator("[data-testid=role]");
  await role.waitFor();
  return role.getAttribute("data-role");
}

/** A fresh page signed in as `key`, handed to `fn`, closed after whatever happens. */
async function withPage<T>(key: string, fn: (page: Page, errors: string[]) => Promise<T>): Promise<T> {
  const { context, page, errors } = await freshPage(browser);
  try {
    const role = await signIn(page, key);
    assert.equal(role, key === ADMIN ? "admin" : "read");
    return await fn(page, errors);
  } catch (e) {
    throw new Error(`${(e as Error).message}\nthe page said: ${errors.join("\n") || "(nothing)"}`);
  } finally {
    await context.close();
  }
}

describe("the dashboard in Chromium", { concurrency: false }, () => {
  // In the suite, not at the file's top: node:test runs a file's top-level before hooks at once,
  // so this one would race practiceSuite's set-up of the hosts (and read a cluster file half made).
  before(async () => {
    // Run alone from the sources, the page's bundle is built here (npm run test:rig builds it).
    if (!existsSync(path.resolve("dist/web/app.js")) || process.env.LAUNCHER_USE_DIST !== "1") {
      const built = spawnSync(process.execPath, ["--import", "tsx", "scripts/build-web.ts"], { encoding: "utf8", timeout: 120_000 });
      assert.equal(built.status, 0, `building the page: ${built.stderr}`);
    }
    daemon = await startGateway(["--control"], { LAUNCHER_ADMIN_KEY: ADMIN, LAUNCHER_API_KEY: INFERENCE, LAUNCHER_RECIPES: dir });
    browser = await startBrowser();
  }, { timeout: 180_000 });

  after(async () => {
    await browser?.close();
    await daemon?.stop();
    assert.doesNotMatch(daemon?.log() ?? "", new RegExp(`${ADMIN}|${INFERENCE}`), "no key in the daemon's log");
  }, { timeout: 60_000 });

  test("it loads behind a key: without one every read is refused and the page asks for one; a wrong key is refused", async () => {
    const bare = await fetch(`${daemon.url}${READ_PATHS.clusters}`);
    assert.equal(bare.status, 401);
    const { context, page } = await freshPage(browser);
    try {
      await page.goto(`${daemon.url}/`);
      await page.locator("form#sign-in").waitFor();
      assert.equal(await page.locator("[data-testid=role]").count(), 0);
      assert.equal(await page.evaluate(async (p) => (await fetch(p)).status, READ_PATHS.deployments), 401);
      await page.fill("input#key", "not-a-key");
      await page.locator("form#sign-in [type=submit]").click();
      await page.locator("[data-testid=sign-in-status]").filter({ hasText: /refused/ }).waitFor();
      assert.equal(await page.locator("[data-testid=role]").count(), 0);
      assert.equal(await page.evaluate(async (p) => (await fetch(p)).status, READ_PATHS.deployments), 401);
      await screenshot(page, "sign-in");
      // No key in the page: not in its HTML, its address or its storage.
      await page.fill("input#key", ADMIN);
      await page.locator("form#sign-in [type=submit]").click();
      assert.equal(await page.locator("[data-testid=role]").getAttribute("data-role"), "admin");
      const kept = await page.evaluate(() => {
        // The page's globals, typed here: the test files compile without the DOM's types.
        const w = globalThis as unknown as { document: { documentElement: { outerHTML: string } }; location: { href: string }; localStorage: unknown; sessionStorage: unknown };
        return `${w.document.documentElement.outerHTML} ${w.location.href} ${JSON.stringify(w.localStorage)} ${JSON.stringify(w.sessionStorage)}`;
      });
      assert.ok(!kept.includes(ADMIN), "the key is nowhere in the page");
      assert.equal(await page.evaluate(async (p) => (await fetch(p)).status, READ_PATHS.deployments), 200);
    } finally {
      await context.close();
    }
  });

  test("the overview shows every node with its memory and lane chat serving", { timeout: 300_000 }, async () => {
    const name = await chatServes();
    await withPage(ADMIN, async (page) => {
      await page.goto(`${daemon.url}/#/`);
      for (const node of ["n1", "n2", "n3", "n4"]) {
        const row = page.locator(`[data-testid=node][data-node=${node}]`);
        await row.waitFor();
        await page.locator(`[data-testid=node][data-node=${node}][data-reachable=true]`).waitFor({ timeout: 60_000 });
        assert.match((await row.locator("[data-testid=memory-headroom]").textContent()) ?? "", /GiB/);
      }
      const lane = page.locator("[data-testid=lane][data-lane=chat][data-state=serving]");
      await lane.waitFor({ timeout: 60_000 });
      assert.equal((await lane.locator("[data-testid=lane-deployment]").textContent())?.trim(), name);
      await page.locator(`[data-testid=deployment-row][data-deployment=${name}]`).waitFor();
      await screenshot(page, "overview");
    });
  });

  test("a boot's phases advance live on its time line, node by node, to serving", { timeout: 300_000 }, async () => {
    const name = "dash-slow";
    const client = launcherProcess(["up", recipe(name, 'PRACTICE_PHASE_DELAY_MS = "2500"\n'), ...SPARE, "--daemon", daemon.url, "--timeout", "2m"], { LAUNCHER_ADMIN_KEY: ADMIN });
    const finished = new Promise<number | null>((resolve) => client.on("close", resolve));
    try {
      await withPage(ADMIN, async (page) => {
        await page.goto(`${daemon.url}/#/`);
        await page.locator(`[data-testid=boot-row][data-deployment=${name}]`).waitFor({ timeout: 60_000 });
        await page.goto(`${daemon.url}/#/boots/${name}`);
        const head = page.locator(`[data-testid=boot][data-deployment=${name}] [data-testid=boot-node][data-node=n3]`);
        await head.waitFor();
        // Every phase the head's row shows from here on, as the page changes it.
        await head.evaluate((el) => {
          const w = globalThis as unknown as { seenPhases: string[]; MutationObserver: new (f: () => void) => { observe(target: unknown, options: unknown): void } };
          const seen: string[] = [el.getAttribute("data-phase") ?? ""];
          w.seenPhases = seen;
          new w.MutationObserver(() => seen.push(el.getAttribute("data-phase") ?? "")).observe(el, { attributes: true, attributeFilter: ["data-phase"] });
        });
        await page.locator(`[data-testid=boot][data-deployment=${name}][data-state=ready]`).waitFor({ timeout: 150_000 });
        const seen = await page.evaluate(() => (globalThis as unknown as { seenPhases: string[] }).seenPhases);
        const order = seen.map((p) => BOOT_PHASES.indexOf(p as BootPhase));
        assert.ok(order.every((i) => i >= 0), `only the contract's phases: ${seen.join(" ")}`);
        assert.deepEqual(order, [...order].sort((a, b) => a - b), `phases in boot order: ${seen.join(" ")}`);
        assert.ok(new Set(seen).size >= 3, `the page showed the phases change while it watched: ${seen.join(" ")}`);
        assert.equal(seen.at(-1), "serving");
        assert.ok((await head.locator("[data-testid=phase-segment]").count()) >= 3);
        // A headless worker says no "serving" of its own (only the head serves the API): its row
        // holds the last phase it said, one of the contract's.
        const worker = await page.locator(`[data-testid=boot-node][data-node=n4]`).getAttribute("data-phase");
        assert.ok(BOOT_PHASES.includes(worker as BootPhase), `the worker's phase: ${worker}`);
        await screenshot(page, "boot");
      });
      assert.equal(await finished, 0);
    } finally {
      client.kill("SIGKILL");
      await down(name);
    }
  });

  test("a failed boot shows its root cause: the node blamed and the lines around the cause", { timeout: 300_000 }, async () => {
    const name = "dash-fails";
    const failing = recipe(name, 'PRACTICE_FAULT = "engine_core_init"\nPRACTICE_FAULT_RANK = "1"\n');
    try {
      const r = await up([failing, ...SPARE]);
      assert.equal(r.code, 1, r.stderr);
      await withPage(ADMIN, async (page) => {
        await page.goto(`${daemon.url}/#/boots/${name}`);
        await page.locator(`[data-testid=boot][data-deployment=${name}][data-state=failed]`).waitFor();
        const cause = page.locator("[data-testid=root-cause]");
        assert.equal(await cause.getAttribute("data-node"), "n4");
        const lines = (await cause.locator("[data-testid=cause-lines]").textContent()) ?? "";
        assert.ok(lines.trim().length > 0, "the lines around the cause are shown");
        await screenshot(page, "boot-failed");
      });
      assert.deepEqual(containersOf(name), [], "the failed boot was rolled back");
    } finally {
      await down(name);
    }
  });

  test("the deployment view draws tok/s, KV cache, queue and TTFT from the practice engine's metrics, and the activity table lists a request", { timeout: 300_000 }, async () => {
    const name = await chatServes();
    await withPage(ADMIN, async (page) => {
      await page.goto(`${daemon.url}/#/deployments/${name}`);
      await page.locator(`[data-testid=deployment][data-deployment=${name}][data-status=serving]`).waitFor({ timeout: 60_000 });
      for (const node of ["n1", "n2"]) await page.locator(`[data-testid=rank][data-node=${node}]`).waitFor();
      assert.match((await page.locator("[data-testid=restarts]").textContent()) ?? "", /^\s*\d+\s*$/);
      // The engine is scraped every few seconds; requests until each chart has points (bounded).
      let sent = 0;
      await within(90_000, "each chart drawn from points", async () => {
        // A request a second while it waits: traffic for the engine's counters and the TTFT chart.
        if (Date.now() - sent > 1000) {
          sent = Date.now();
          assert.equal(await chat(), 200);
        }
        const counts = await page.locator("[data-testid=chart]").evaluateAll((els) => els.map((e) => [e.getAttribute("data-metric"), Number(e.getAttribute("data-points") ?? "0"), e.querySelector("canvas") !== null] as const));
        const drawn = new Set(counts.filter(([, n, canvas]) => n > 0 && canvas).map(([m]) => m));
        return ["generation_tps", "kv_cache_usage", "queue", "ttft"].every((m) => drawn.has(m)) ? true : undefined;
      });
      // Load for a while, until a metrics point shows tokens generated, and the page has drawn it:
      // the screenshot then shows the charts at work (the README's picture).
      const pointsNow = async (): Promise<number> => Number(await page.locator("[data-testid=chart][data-metric=generation_tps]").getAttribute("data-points"));
      const before = await pointsNow();
      await within(60_000, "a metrics point with tokens generated, drawn", async () => {
        await Promise.all(Array.from({ length: 4 }, () => chat(64)));
        const windows = (await (await fetch(`${daemon.url}${READ_PATHS.metrics}`, { headers: { authorization: `Bearer ${INFERENCE}` } })).json()) as { windows: { deployment: string; points: { generation_tps?: number }[] }[] };
        const busy = windows.windows.find((w) => w.deployment === name)?.points.some((p) => (p.generation_tps ?? 0) > 0) === true;
        return busy && (await pointsNow()) > before ? true : undefined;
      });
      await screenshot(page, "deployment");
      await page.goto(`${daemon.url}/#/activity`);
      await page.locator("[data-testid=activity-row][data-status='200'][data-lane=chat]").first().waitFor({ timeout: 30_000 });
      await screenshot(page, "activity");
      // The request just sent appears while the table is open (pushed, not reloaded).
      const rows = await page.locator("[data-testid=activity-row]").count();
      assert.equal(await chat(), 200);
      await within(30_000, "the new request's row", async () => ((await page.locator("[data-testid=activity-row]").count()) > rows ? true : undefined));
    });
  });

  test("the logs view merges both nodes' lines and filters by node; history draws the boots of a recipe", { timeout: 300_000 }, async () => {
    const name = await chatServes();
    await withPage(ADMIN, async (page) => {
      await page.goto(`${daemon.url}/#/logs/${name}`);
      for (const node of ["n1", "n2"]) await page.locator(`[data-testid=log-line][data-node=${node}]`).first().waitFor({ timeout: 60_000 });
      await page.selectOption("select[data-testid=log-node-filter]", "n2");
      await within(30_000, "only n2's lines", async () => {
        const nodes = await page.locator("[data-testid=log-line]").evaluateAll((els) => els.map((e) => e.getAttribute("data-node")));
        return nodes.length > 0 && nodes.every((n) => n === "n2") ? true : undefined;
      });
      await screenshot(page, "logs");
      await page.goto(`${daemon.url}/#/history`);
      const bars = page.locator(`[data-testid=history-bars][data-recipe=${name}]`);
      await bars.waitFor();
      assert.ok(Number(await bars.getAttribute("data-boots")) >= 1);
      await screenshot(page, "history");
      await page.goto(`${daemon.url}/#/runs`);
      await page.locator("[data-testid=runs-plot]").waitFor();
      await screenshot(page, "runs");
    });
  });

  test("an inference key sees the page without a single action, and the control API refuses its session", { timeout: 300_000 }, async () => {
    const name = await chatServes();
    await withPage(INFERENCE, async (page) => {
      await page.goto(`${daemon.url}/#/`);
      await page.locator("[data-testid=lane][data-lane=chat][data-state=serving]").waitFor({ timeout: 60_000 });
      assert.equal(await page.locator("button[data-action]").count(), 0);
      await page.goto(`${daemon.url}/#/deployments/${name}`);
      await page.locator(`[data-testid=deployment][data-deployment=${name}]`).waitFor();
      assert.equal(await page.locator("button[data-action]").count(), 0);
      await screenshot(page, "read-only");
      // Its session, even with the CSRF token it was given, may not act.
      const refused = await page.evaluate(
        async ({ session, stop, csrf }) => {
          const s = (await (await fetch(session)).json()) as { csrf_token: string };
          return (await fetch(stop, { method: "POST", headers: { [csrf]: s.csrf_token } })).status;
        },
        { session: SESSION_ROUTES.session, stop: CONTROL_PATHS.stop(name), csrf: CSRF_HEADER },
      );
      assert.equal(refused, 403);
    });
    assert.equal(containersOf(name).length, 2, "nothing was stopped");
  });

  test("the stop button stops a deployment after its confirmation: no container is left on any node", { timeout: 300_000 }, async () => {
    const name = "dash-stop";
    try {
      ok(await up([recipe(name), ...SPARE]), "up dash-stop");
      assert.equal(containersOf(name).length, 2);
      await withPage(ADMIN, async (page) => {
        // Every stop the page sends is recorded: a declined one is proved by its request never
        // leaving, not by containers read right after a click (a stop takes seconds to remove them).
        const stops: { body: string | null }[] = [];
        page.on("request", (r) => {
          if (r.method() === "POST" && new URL(r.url()).pathname === CONTROL_PATHS.stop(name)) stops.push({ body: r.postData() });
        });
        await page.goto(`${daemon.url}/#/deployments/${name}`);
        const stop = page.locator(`button[data-action=stop][data-target=${name}]`);
        await stop.first().click();
        const confirm = page.locator("dialog[data-testid=confirm]");
        await confirm.waitFor();
        // Declined first: nothing is sent.
        await confirm.locator("[data-testid=confirm-no]").click();
        await confirm.waitFor({ state: "hidden" });
        assert.equal(stops.length, 0, "a declined stop sends nothing");
        assert.equal(await page.locator("[data-testid=action-result]").count(), 0, "and says nothing was done");
        await stop.first().click();
        await confirm.locator("[data-testid=confirm-yes]").click();
        const result = page.locator("[data-testid=action-result]");
        await result.waitFor({ timeout: 90_000 });
        await page.locator("[data-testid=action-result][data-outcome]").waitFor({ timeout: 90_000 });
        assert.equal(await result.getAttribute("data-outcome"), "ok", (await result.textContent()) ?? "");
        // The recorder sees a stop that is sent: one, naming the cluster the page showed it on.
        assert.equal(stops.length, 1, "the confirmed stop was sent once");
        assert.equal(typeof (JSON.parse(stops[0]?.body ?? "{}") as { cluster?: unknown }).cluster, "string", "the stop names its cluster");
        await screenshot(page, "stopped");
      });
      assert.deepEqual(containersOf(name), [], "no container left on any node");
    } finally {
      await down(name);
    }
  });
});
