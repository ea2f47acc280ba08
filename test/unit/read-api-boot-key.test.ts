import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { bootAgain } from "../../src/daemon/reboot.js";
import type { Snapshot } from "../../src/daemon/discovery.js";
import { launcherApi, ReadFeed, NO_READ_SOURCES, type ReadParts } from "../../src/daemon/read-api.js";
import { readLogs } from "../../src/daemon/read-client.js";
import { keyChecker } from "../../src/gateway/auth.js";
import { clusterStatus } from "../../src/nodes/status.js";
import { Store } from "../../src/store/store.js";
import { BootRegistry } from "../../src/supervise/boots.js";
import { FakeCluster, RECIPE, UP_TO_MAX_LEN } from "../support/fake-cluster.js";
import { until } from "../support/until.js";

// A booting deployment's engine may print its args, key and all (vLLM's "non-default args" line
// before redact_sensitive_args; the practice engine does): the read API's logs clear the key of
// the launch from its start, not only once the deployment is ready and the store has it.
test("read API logs: a booting deployment's engine key is cleared from its lines before it is ready", async () => {
  const ENGINE_KEY = "engine-key-5e1f0123";
  const fc = await FakeCluster.start();
  const store = new Store(":memory:");
  const registry = new BootRegistry(Date.now);
  let snap: Snapshot = { deployments: [], strangers: [], unreachable: [] };
  const parts: ReadParts = {
    discovery: { snapshot: () => snap, subscribe: () => () => undefined } as unknown as ReadParts["discovery"],
    supervision: () => ({}) as ReturnType<ReadParts["supervision"]>,
    clusters: async () => [fc.cluster],
    session: async () => fc.session,
    store,
    registry,
    sources: NO_READ_SOURCES,
    log: () => undefined,
  };
  const api = launcherApi(parts, new ReadFeed(parts), { checkRead: keyChecker(["ADMIN-xxxxxxxx", "INFER-xxxxxxxx"]) }, undefined);
  const server = createServer((req, res) => void api(req, res, (req.url ?? "/").split("?")[0] ?? "/"));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  fc.script = (c, n) => n.say(c.name, `(APIServer pid=1) INFO non-default args: {'model': 'm', 'api_key': ['${ENGINE_KEY}']}`, ...UP_TO_MAX_LEN.slice(1));
  const plan = fc.plan(`${RECIPE}VLLM_API_KEY = "${ENGINE_KEY}"\n`);
  const entry = registry.start({ deployment: plan.deployment, cluster: plan.cluster }, (emit, signal, detach) => bootAgain(plan, fc.session, signal, store, emit, undefined, detach));
  try {
    const printed = (): boolean =>
      fc.containers().some((c) => {
        const [node = "", name = ""] = c.split(":");
        return fc.node(node).logOf(name).some((l) => l.includes(ENGINE_KEY));
      });
    await until("the head to print its args", printed, 10_000);
    const s = await clusterStatus(fc.session, new Date());
    snap = { deployments: s.deployments.map((d) => ({ ...d, cluster: fc.cluster.name })), strangers: [], unreachable: [], at: new Date() };
    assert.equal(entry.running, true);
    assert.equal(store.engineKey(fc.cluster.name, plan.deployment), undefined, "not ready: the store has no engine key yet");
    const read = await readLogs({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, key: "INFER-xxxxxxxx" }, plan.deployment);
    assert.ok(read.lines.some((l) => l.text.includes("non-default args")), JSON.stringify(read.lines).slice(0, 400));
    assert.doesNotMatch(JSON.stringify(read), new RegExp(ENGINE_KEY));
  } finally {
    entry.cancel("test over");
    await entry.ended;
    server.closeAllConnections();
    server.close();
    await fc.close();
    store.close();
  }
});
