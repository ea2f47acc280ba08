import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { CONTROL_PATHS, decodeStop, type StopAnswer } from "../../src/contract/control-api.js";
import { READ_PATHS } from "../../src/contract/read-api.js";
import { launcher, launcherContainers, ok, practiceSuite, startGateway, variant, within, type Daemon } from "./practice-cluster.js";

// The control API's stop of a deployment (POST /launcher/v1/deployments/NAME/stop, the page's stop
// button and `launcher down NAME` with a daemon alike) on the practice cluster of 2 hosts: a
// deployment booted through the daemon is stopped there, after which no container of it is left
// on any host (docker ps on each, as the other rig tests list them); an inference key stops nothing.
const dir = practiceSuite(2, "launcher-stop-route-");
const ADMIN = "admin-key-stop-route-7c41";
const INFERENCE = "inference-key-stop-route-2b90";
// The daemon's gateway has an inference key: it boots only recipes whose engine demands one of its own.
const recipe = (name: string): string => variant(dir, name, "practice-2x", `[env]\nVLLM_API_KEY = "engine-key-${name}"\n`);

let daemon: Daemon;



const up = (args: string[]) => launcher(["up", ...args, "--daemon", daemon.url, "--timeout", "2m"], 180_000, { LAUNCHER_ADMIN_KEY: ADMIN });
const containersOf = (name: string): string[] => launcherContainers(2).filter((c) => c.includes(`launcher-${name}-`));
const asAdmin = { authorization: `Bearer ${ADMIN}` };

/** Once the daemon's discovery lists `name` (its poll is 1 s). */
async function seen(name: string): Promise<void> {
  await within(30_000, `the daemon sees ${name}`, async () => {
    const r = await fetch(`${daemon.url}${READ_PATHS.deployments}`, { headers: asAdmin, signal: AbortSignal.timeout(5000) });
    const body = (await r.json()) as { deployments: { deployment: string }[] };
    return body.deployments.some((d) => d.deployment === name) ? true : undefined;
  });
}

describe("the daemon's stop route on the practice cluster", { concurrency: false }, () => {
  // In the suite, not at the file's top: node:test runs a file's top-level before hooks at once,
  // so this one would race practiceSuite's set-up of the hosts (and read a cluster file half made).
  before(async () => {
    daemon = await startGateway(["--control"], { LAUNCHER_ADMIN_KEY: ADMIN, LAUNCHER_API_KEY: INFERENCE, LAUNCHER_RECIPES: dir });
  }, { timeout: 60_000 });

  after(async () => {
    await daemon?.stop();
    assert.doesNotMatch(daemon?.log() ?? "", new RegExp(`${ADMIN}|${INFERENCE}`), "no key in the daemon's log");
  }, { timeout: 60_000 });

  test("POST stop with the admin key stops a deployment booted through the daemon: no container left on any host, its lane emptied; an inference key stops nothing", { timeout: 300_000 }, async () => {
    const name = "stop-a";
    ok(await up([recipe(name), "--lane", "chat"]), `up ${name}`);
    assert.equal(containersOf(name).length, 2);
    await seen(name);
    const refused = await fetch(`${daemon.url}${CONTROL_PATHS.stop(name)}`, { method: "POST", headers: { authorization: `Bearer ${INFERENCE}` } });
    assert.equal(refused.status, 401);
    assert.equal(containersOf(name).length, 2, "an inference key stops nothing");

    const res = await fetch(`${daemon.url}${CONTROL_PATHS.stop(name)}`, { method: "POST", headers: { ...asAdmin, "content-type": "application/json" }, body: JSON.stringify({ grace_seconds: 1 }), signal: AbortSignal.timeout(60_000) });
    assert.equal(res.status, 200, await res.clone().text());
    const decoded = decodeStop(await res.json());
    assert.ok(decoded.ok, JSON.stringify(decoded));
    const answer: StopAnswer = decoded.answer;
    assert.deepEqual([answer.deployment, answer.stopped, answer.deployments, answer.lane, answer.again], [name, true, [name], "chat", undefined]);
    assert.equal(answer.nodes.length, 2);
    for (const n of answer.nodes) assert.equal(n.outcome, "removed", JSON.stringify(n));
    assert.deepEqual(containersOf(name), [], "no container left on any host");
    const lanes = (await (await fetch(`${daemon.url}${READ_PATHS.lanes}`, { headers: asAdmin })).json()) as { lanes: { name: string; state: string }[] };
    assert.equal(lanes.lanes.find((l) => l.name === "chat")?.state, "empty");
    const again = await fetch(`${daemon.url}${CONTROL_PATHS.stop("never-booted")}`, { method: "POST", headers: asAdmin });
    assert.equal(again.status, 404);
  });

  test("`launcher down NAME` with the daemon stops through the same route and prints what it prints without one", { timeout: 300_000 }, async () => {
    const name = "stop-b";
    ok(await up([recipe(name)]), `up ${name}`);
    await seen(name);
    const down = ok(await launcher(["down", name, "--daemon", daemon.url, "--grace", "1"], 120_000, { LAUNCHER_ADMIN_KEY: ADMIN }), `down ${name}`);
    assert.deepEqual(down.stdout.trim().split("\n").sort(), [`stopped ${name}: n1 launcher-${name}-r0`, `stopped ${name}: n2 launcher-${name}-r1`].sort());
    assert.match(daemon.log(), new RegExp(`stopped ${name} on \\S+ for a client \\(launcher down\\): no container of it is left`), "the daemon ran it");
    assert.deepEqual(containersOf(name), [], "no container left on any host");
    // A name the daemon does not see is stopped from here, as without a daemon.
    const none = ok(await launcher(["down", "deployment/no-such", "--daemon", daemon.url], 120_000, { LAUNCHER_ADMIN_KEY: ADMIN }), "down no-such");
    assert.equal(none.stdout.trim(), "nothing to stop for deployment/no-such");
  });
});
