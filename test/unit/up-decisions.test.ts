import assert from "node:assert/strict";
import { test } from "node:test";
import { bootKept } from "../../src/app/up-use-case.js";
import { claimNodes } from "../../src/claims/claims.js";
import { RemoteError, UserError } from "../../src/config/errors.js";
import { Store } from "../../src/store/store.js";
import { freePort } from "../support/fake-engine.js";
import { meminfoText } from "../support/fake-node.js";
import { FakeCluster, HEAD_WAITING, IMAGE_ID, RAY_HEAD_UP, RAY_WORKER_NOT_JOINED, RECIPE, WORKER_CONNECTING } from "../support/fake-cluster.js";
import { refused, withCluster } from "../support/refusals.js";

// up()'s decisions, run for real over a FakeCluster (test/support/): which deployment is refused,
// what a rollback removes, which rank a timeout blames, which image and which memory fit are
// refused. A boot over fakes takes milliseconds where the practice cluster takes seconds, so the
// rig keeps one end-to-end test per family, for what only the wire shows: the hung worker blamed
// and rolled back, and a hung boot's claims taken over (test/integration/fresh-hosts/up-hardening.test.ts),
// an image's real entrypoint and version (test/integration/image-contract.test.ts), real
// /proc/meminfo (test/integration/fit.test.ts).

const runsOn = (fc: FakeCluster, ...nodes: string[]): number => nodes.reduce((n, node) => n + fc.node(node).asked("run").length, 0);

test("same name on other nodes is refused, naming where it runs; the serving one is untouched; under another name it runs beside it", () =>
  withCluster({ nodes: 4 }, async (fc) => {
    assert.equal((await fc.up(fc.plan(RECIPE))).status, "ready");
    await refused(
      fc.up(fc.plan(RECIPE, { nodes: ["n3", "n4"] })),
      UserError,
      /deployment r already exists on n1, n2 \(serving\) with other options: .*nodes n1,n2, asked n3,n4/,
      /unique across the cluster/,
      /--name OTHER.*launcher down r/,
    );
    assert.equal(runsOn(fc, "n3", "n4"), 0, "nothing started");
    assert.deepEqual(fc.containers(), ["n1:launcher-r-r0:running", "n2:launcher-r-r1:running"]);
    const other = await fc.up(fc.plan(RECIPE, { nodes: ["n3", "n4"], deployment: "r-b", apiPort: await freePort("127.0.0.3") }));
    assert.equal(other.status, "ready");
    assert.equal(fc.containers().length, 4);
  }));

test("up with another port than the running one is refused, saying what differs; the very same plan is already running", () =>
  withCluster({}, async (fc) => {
    const plan = fc.plan(RECIPE);
    await fc.up(plan);
    const port = await freePort();
    await refused(fc.up(fc.plan(RECIPE, { apiPort: port })), UserError, new RegExp(`endpoint http://127\\.0\\.0\\.1:${plan.api_port}, asked http://127\\.0\\.0\\.1:${port}`));
    assert.deepEqual(fc.containers(), ["n1:launcher-r-r0:running", "n2:launcher-r-r1:running"]);
    assert.equal((await fc.up(plan)).status, "already-running");
    assert.equal(runsOn(fc, "n1", "n2"), 2, "one boot only");
  }));

test("busy nodes: another deployment running on the plan's nodes refuses the boot, naming it and the fix", () =>
  withCluster({ nodes: 3 }, async (fc) => {
    await fc.up(fc.plan(RECIPE));
    await refused(fc.up(fc.plan(RECIPE, { deployment: "b", nodes: ["n3", "n2"] })), UserError, /preflight failed for b; no container was started/, /n2 held by deployment r: stop it first \(launcher down r\)/);
    assert.equal(runsOn(fc, "n2", "n3"), 1, "only r's own start on n2");
    assert.deepEqual(fc.containers(), ["n1:launcher-r-r0:running", "n2:launcher-r-r1:running"]);
  }));

test("a hung boot another up left is not 'already running': up names its state and the fix, and starts and removes nothing", () =>
  withCluster({}, async (fc) => {
    const plan = fc.plan(RECIPE, { deployment: "hung" });
    fc.place(plan, "0123456789ab", (rank) => (rank === 0 ? HEAD_WAITING : WORKER_CONNECTING));
    await refused(fc.up(plan), UserError, /deployment hung exists on n1, n2 but does not serve \(status booting, phase loading\)/, /launcher down hung/);
    assert.equal(runsOn(fc, "n1", "n2"), 0);
    assert.deepEqual(fc.containers(), ["n1:launcher-hung-r0:running", "n2:launcher-hung-r1:running"]);
  }));

/** A boot whose head waits at the rendezvous for a worker that never connects. */
const hangs = (fc: FakeCluster): void => {
  fc.script = (c, n) => n.say(c.name, ...(c.labels["launcher.rank"] === "0" ? HEAD_WAITING : WORKER_CONNECTING));
};

test("a rollback removes only the containers its own boot created, not another boot's of the same name", () =>
  withCluster({ nodes: 3 }, async (fc) => {
    hangs(fc);
    const script = fc.script;
    const plan = fc.plan(RECIPE, { deployment: "dup" });
    fc.script = (c, n) => {
      // Meanwhile another launcher's boot of the same name (its own launcher.boot id, every other
      // label a rank of this deployment carries) on n3.
      const labels = { ...plan.nodes[0]?.labels, "launcher.node": "n3", "launcher.boot": "0123456789ab" };
      if (c.labels["launcher.rank"] === "0") {
        fc.node("n3").add("launcher-dup-r0", labels, { state: "created" });
        // And one on a node of this boot: a rollback by name or by deployment on its own nodes would take it.
        fc.node("n1").add("launcher-dup-r9", { ...labels, "launcher.node": "n1" }, { state: "created" });
      }
      return script(c, n);
    };
    const text = await refused(fc.up(plan, { timeoutMs: 400 }), RemoteError, /timed out after 0 s/, /rolled back: removed 2 containers \(n1\/launcher-dup-r0, n2\/launcher-dup-r1\)/);
    assert.doesNotMatch(text, /n3/);
    assert.deepEqual(fc.containers(), ["n1:launcher-dup-r9:created", "n3:launcher-dup-r0:created"]);
  }));

test("an mp worker that hangs is blamed, not the head that waits for it; everything rolled back", () =>
  withCluster({}, async (fc) => {
    hangs(fc);
    await refused(
      fc.up(fc.plan(RECIPE, { deployment: "worker-hang" }), { timeoutMs: 400 }),
      RemoteError,
      /^n2 \(rank 1\): boot of worker-hang failed: never joined the other ranks: timed out after 0 s \(phase loading\) while n1 waited at the rendezvous/,
      /last lines of n2's log:\n.*INFO non-default args/,
    );
    assert.deepEqual(fc.containers(), []);
  }));

test("Ray: the worker that never registered is named, not the head waiting for it; everything rolled back", () =>
  withCluster({}, async (fc) => {
    fc.script = (c, n) => n.say(c.name, ...(c.labels["launcher.rank"] === "0" ? RAY_HEAD_UP : RAY_WORKER_NOT_JOINED));
    const ray = RECIPE.replace('distributed_backend = "mp"', 'distributed_backend = "ray"');
    assert.notEqual(ray, RECIPE, "the recipe names its backend");
    const text = await refused(
      fc.up(fc.plan(ray, { deployment: "ray-late" }), { timeoutMs: 400 }),
      RemoteError,
      /^n2 \(rank 1\): boot of ray-late failed: never joined the other ranks: timed out after 0 s \(phase starting\) while n1 waited at the rendezvous/,
    );
    assert.doesNotMatch(text, /n1 \(rank 0\): boot of ray-late failed/);
    assert.deepEqual(fc.containers(), []);
  }));

const OLD_ENTRY = ["python3", "-m", "vllm.entrypoints.openai.api_server"];

test("image contract: an ENTRYPOINT that is not vllm serve is refused before any container starts, with the recipe's fix", () =>
  withCluster({ image: { id: IMAGE_ID, entrypoint: OLD_ENTRY } }, async (fc) => {
    await refused(
      fc.up(fc.plan(RECIPE)),
      UserError,
      /preflight failed for r; no container was started/,
      /image img:local \(vLLM 0\.12\.0\) has ENTRYPOINT \["python3","-m","vllm\.entrypoints\.openai\.api_server"\], not vllm serve/,
      /set entrypoint = \["vllm", "serve"\] in the recipe/,
    );
    assert.deepEqual(fc.containers(), []);
    // The recipe's own entrypoint makes the image fit.
    const engine: string[] = [];
    const r = await fc.up(fc.plan(`${RECIPE.replace("[env]", 'entrypoint = ["vllm", "serve"]\n[env]')}`), { progress: { ...fc.progress(), engine: (v) => void engine.push(v) } });
    assert.equal(r.status, "ready");
    assert.deepEqual(engine, ["0.12.0"]);
  }));

test("image contract: a vLLM older than 0.11.1 (no --nnodes) is refused before any container starts", () =>
  withCluster({ image: { id: IMAGE_ID, entrypoint: ["vllm", "serve"], version: "0.10.2" } }, async (fc) => {
    const text = await refused(fc.up(fc.plan(RECIPE)), UserError, /image img:local has vLLM 0\.10\.2, older than 0\.11\.1, the first whose vllm serve takes --nnodes/);
    assert.doesNotMatch(text, /not vllm serve/);
    assert.equal(runsOn(fc, "n1", "n2"), 0);
    assert.deepEqual(fc.containers(), []);
  }));

test("fit: a KV budget larger than a node's total memory stops up before any container starts, naming node and figures", () =>
  withCluster({ meminfo: meminfoText(24, 23) }, async (fc) => {
    const big = RECIPE.replace('"--enable-prefix-caching",', '"--enable-prefix-caching", "--kv-cache-memory", "214748364800",');
    const text = await refused(fc.up(fc.plan(big)), UserError, /preflight failed for r; no container was started/);
    for (const node of ["n1", "n2"]) {
      assert.match(text, new RegExp(`${node}: the deployment needs \\d+\\.\\d GiB, more than the node's total 24\\.0 GiB`));
      assert.match(text, new RegExp(`${node}: need \\d+\\.\\d GiB = .*KV cache 200\\.0 \\(--kv-cache-memory 214748364800\\)`));
    }
    assert.equal(runsOn(fc, "n1", "n2"), 0);
    assert.deepEqual(fc.containers(), []);
  }));

test("fit: a node whose available memory is short (not its total) is refused, that node only, saying what holds it", () =>
  withCluster({}, async (fc) => {
    fc.node("n2").setMemory(128, 40);
    const text = await refused(fc.up(fc.plan(RECIPE)), UserError, /n2: the deployment needs 123\.8 GiB, but only 40\.0 of 128\.0 GiB are available now: 88\.0 GiB in use/);
    assert.doesNotMatch(text, /n1: the deployment needs/);
    assert.doesNotMatch(text, /more than the node's total/);
    assert.deepEqual(fc.containers(), []);
  }));

test("a boot that fits prints the arithmetic node by node and starts each rank once, mp ranks at once", () =>
  withCluster({}, async (fc) => {
    // Each rank's docker run returns only once the other's was issued too: a rank whose run waited
    // for the other's to return (workers first, or head first) would never start, and the boot would fail.
    const issuedOn = new Map<string, () => void>();
    const issued = new Map(fc.nodes.map((n) => [n.node, new Promise<void>((resolve) => issuedOn.set(n.node, resolve))]));
    for (const [node, other] of [["n1", "n2"], ["n2", "n1"]] as const) {
      const n = fc.node(node);
      const run = n.run.bind(n);
      n.run = async (argv, env) => {
        issuedOn.get(node)?.();
        let timer: NodeJS.Timeout | undefined;
        const gaveUp = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${other}'s docker run was not issued beside ${node}'s`)), 10_000)));
        await Promise.race([issued.get(other), gaveUp]).finally(() => clearTimeout(timer));
        return run(argv, env);
      };
    }
    const r = await fc.up(fc.plan(RECIPE));
    assert.equal(r.status, "ready");
    assert.match(fc.notes.join("\n"), /memory fit \(GiB\):\n {2}n1: need 123\.8 GiB = engine budget 117\.8/);
    assert.deepEqual(fc.started, ["n1/launcher-r-r0", "n2/launcher-r-r1"]);
    // Every container carries the boot's id, the one up returns.
    for (const n of fc.nodes) for (const c of await n.containers("launcher.deployment=r")) assert.equal(c.labels["launcher.boot"], r.boot);
  }));

// The use case's boot step (src/app/up-use-case.ts bootKept): the nodes' claims (CLAIM_SCRIPT, answered
// by the fake nodes), up, and the boot's record in the store.
test("the boot step claims the plan's nodes: a node another live launcher holds is busy, nothing starts; a boot gives its claims back and is recorded", () =>
  withCluster({}, async (fc) => {
    const store = new Store(":memory:");
    const plan = fc.plan(RECIPE);
    const host = { store, say: () => undefined, progress: fc.progress(), signal: new AbortController().signal, now: () => new Date(), leaseMs: 60_000, timeoutMs: 20_000, push: false };
    const other = await claimNodes(new Map([["n2", fc.node("n2").transport]]), { command: "launcher up other", deployment: "other", leaseMs: 60_000, now: () => new Date(), note: () => undefined, onLost: () => undefined });
    try {
      await refused(bootKept(plan, fc.session, host, "launcher up r"), UserError, /^busy: node n2 is claimed by `launcher up other` \(pid \d+ on .*deployment other\)/);
      assert.equal(runsOn(fc, "n1", "n2"), 0);
      assert.equal(fc.node("n1").claim, undefined, "n1's claim given back");
    } finally {
      await other.release();
    }
    const outcome = await bootKept(plan, fc.session, host, "launcher up r");
    assert.equal(outcome.status, "ready");
    assert.deepEqual(fc.nodes.map((n) => n.claim), [undefined, undefined]);
    assert.deepEqual(store.history("r", 1).map((b) => [b.deployment, b.outcome, b.engine_version]), [["r", "ready", "0.12.0"]]);
    store.close();
  }));
