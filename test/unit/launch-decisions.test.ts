import assert from "node:assert/strict";
import { hostname } from "node:os";
import { test } from "node:test";
import { upUseCase } from "../../src/app/up-use-case.js";
import { laneKey } from "../../src/claims/locks.js";
import { RemoteError, UserError } from "../../src/config/errors.js";
import { LABELS } from "../../src/contract/deployment.js";
import { listNodes } from "../../src/nodes/labels.js";
import { stopDeployments } from "../../src/nodes/down.js";
import { clusterStatus } from "../../src/nodes/status.js";
import { Store } from "../../src/store/store.js";
import { FakeCluster, HEAD_WAITING, IMAGE, RECIPE, UP_TO_MAX_LEN, WORKER_CONNECTED, WORKER_CONNECTING } from "../support/fake-cluster.js";
import { refused, withCluster } from "../support/refusals.js";

// `up`'s launch decisions over fake nodes (test/support), moved from the practice cluster: a boot
// that hangs (blamed, timed out, rolled back), a deployment that crashes after it was ready (no
// longer serving; down removes it), an image missing on some nodes, nodes another deployment holds,
// and a lane another `up` is putting a recipe in. The rig keeps one boot end to end
// (test/integration/launch.test.ts "2 nodes: up, answer a chat request, up again is a no-op") and
// the failure a real engine prints and launcher reads through docker logs ("fault oom").

test("a boot that hangs before the rendezvous (PRACTICE_FAULT=hang): timed out in phase loading, the head's last lines shown, everything rolled back", () =>
  withCluster({}, async (fc) => {
    // The practice engine's hang: the head stops after "Using max model len"; the worker, ahead of
    // it, tries to reach the head that never listens (docker-images/practice-engine/serve).
    fc.script = (c, n) => n.say(c.name, ...(c.labels[LABELS.rank] === "0" ? UP_TO_MAX_LEN : WORKER_CONNECTING));
    const text = await refused(
      fc.up(fc.plan(RECIPE, { deployment: "fault-hang" }), { timeoutMs: 400 }),
      RemoteError,
      /^n1 \(rank 0\): boot of fault-hang failed: timed out after 0 s \(phase loading\); the other ranks got no further/,
      /last lines of n1's log:\n(.*\n)*.*Using max model len/,
      /rolled back: removed 2 containers \(n1\/launcher-fault-hang-r0, n2\/launcher-fault-hang-r1\)/,
    );
    assert.doesNotMatch(text, /\n\s+at .*\.ts:\d+/, "no stack");
    assert.deepEqual(fc.containers(), []);
  }));

// What the practice engine prints for a fault (docker-images/practice-engine/lib/faults.js, in
// vLLM's own record format; its own tests pin it), on the rank it strikes; that rank then exits 1.
const WRAPPER = "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}";
const faults: { fault: string; rank: number; lines: readonly string[]; where: RegExp; cause: RegExp }[] = [
  {
    fault: "kv_too_small",
    rank: 0,
    lines: [
      "(EngineCore_DP0 pid=1) ERROR 01-01 00:00:02 [core.py:1108] ValueError: To serve at least one request with the model's max seq len (8192), (24.00 GiB KV cache is needed, which is larger than the available KV cache memory (11.02 GiB). Based on the available memory, the estimated maximum model length is 3761.",
      "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ],
    where: /^n1 \(rank 0\): boot of fault-kv_too_small failed/,
    cause: /cause: .*ValueError: To serve at least one request .*larger than the available KV cache memory/,
  },
  {
    fault: "engine_core_init",
    rank: 0,
    lines: [
      "(Worker_TP0 pid=1) ERROR 01-01 00:00:02 [multiproc_executor.py:870] ImportError: /usr/local/lib/python3.12/dist-packages/b12x/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
      "(EngineCore_DP0 pid=1) ERROR 01-01 00:00:02 [core.py:1] WorkerProc failed to start.",
      WRAPPER,
    ],
    where: /^n1 \(rank 0\): boot of fault-engine_core_init failed/,
    cause: /cause: .*ImportError: .*undefined symbol/,
  },
  {
    fault: "worker_exit",
    rank: 1,
    lines: ["(Worker_TP1 pid=1) INFO 01-01 00:00:02 [multiproc_executor.py:702] Worker exiting: simulated fault (practice-engine)"],
    where: /^n2 \(rank 1\): boot of fault-worker_exit failed/,
    cause: /container exited with status 1|Worker exiting: simulated fault/,
  },
];
for (const f of faults) {
  test(`fault ${f.fault}: the boot fails naming the node and the cause, and nothing is left`, () =>
    withCluster({}, async (fc) => {
      fc.script = (c, n) => {
        const rank = Number(c.labels[LABELS.rank]);
        if (rank !== f.rank) return n.say(c.name, ...(rank === 0 ? HEAD_WAITING : WORKER_CONNECTED));
        n.say(c.name, ...UP_TO_MAX_LEN, ...f.lines);
        n.exit(c.name, 1);
      };
      const text = await refused(fc.up(fc.plan(RECIPE, { deployment: `fault-${f.fault}` })), RemoteError, f.where, f.cause, new RegExp(`rolled back: removed 2 containers \\(n1/launcher-fault-${f.fault}-r0, n2/launcher-fault-${f.fault}-r1\\)`));
      assert.doesNotMatch(text, /\n\s+at .*\.ts:\d+/, "no stack");
      assert.deepEqual(fc.containers(), []);
    }));
}

test("crash after ready: up returns ready, then the deployment is degraded naming the rank; down removes its exited containers", () =>
  withCluster({}, async (fc) => {
    const r = await fc.up(fc.plan(RECIPE, { deployment: "crash" }));
    assert.equal(r.status, "ready");
    // The practice engine's crash_after_ready: the head's engine dies with an illegal memory access.
    fc.node("n1").say("launcher-crash-r0", "(EngineCore_DP0 pid=1) ERROR EngineCore encountered a fatal error.", "RuntimeError: CUDA error: an illegal memory access was encountered");
    fc.node("n1").exit("launcher-crash-r0", 1);
    const status = (await clusterStatus(fc.session, new Date())).deployments.find((d) => d.deployment === "crash");
    assert.equal(status?.status, "degraded");
    assert.deepEqual(status?.missing, ["rank 0 on n1 (exited, exit 1)"]);
    assert.deepEqual(fc.containers(), ["n1:launcher-crash-r0:exited", "n2:launcher-crash-r1:running"]);
    const store = new Store(":memory:");
    try {
      const { stopped } = await stopDeployments(await listNodes(fc.session), ["crash"], { store, cluster: fc.cluster.name, now: () => new Date() }, { graceSeconds: 1 });
      assert.deepEqual(stopped, ["crash"]);
    } finally {
      store.close();
    }
    assert.deepEqual(fc.containers(), [], "the exited head too: docker ps -a would list it");
  }));

test("an image missing on the plan's nodes fails preflight naming every one of them (a node outside the plan is not), before anything starts", () =>
  withCluster({ nodes: 3 }, async (fc) => {
    for (const n of fc.nodes) n.images.delete(IMAGE);
    const text = await refused(fc.up(fc.plan(RECIPE, { deployment: "no-image" })), UserError, /preflight failed for no-image; no container was started/, /image img:local is missing on n1, n2\b/);
    assert.doesNotMatch(text, /n3/);
    assert.deepEqual(fc.nodes.map((n) => n.asked("run").length), [0, 0, 0]);
    assert.deepEqual(fc.containers(), []);
  }));

test("up --no-push with the image missing on one node only: refused naming that node and how to send it, before anything starts", () =>
  withCluster({}, async (fc) => {
    fc.node("n2").images.delete(IMAGE);
    const text = await refused(fc.up(fc.plan(RECIPE, { deployment: "no-push" }), { push: false }), UserError, /preflight failed for no-push; no container was started/, /image img:local is missing on n2: launcher images push r sends it \(up does that itself without --no-push\)/);
    assert.doesNotMatch(text, /missing on n1/);
    assert.deepEqual(fc.nodes.map((n) => n.asked("run").length), [0, 0]);
    assert.deepEqual(fc.containers(), []);
  }));

test("every node held by another deployment: up names them all, the holder and the fix; nothing is started or stopped", () =>
  withCluster({}, async (fc) => {
    await fc.up(fc.plan(RECIPE, { deployment: "practice-2x" }));
    await refused(
      fc.up(fc.plan(RECIPE, { deployment: "intruder" })),
      UserError,
      /preflight failed for intruder; no container was started/,
      /n1, n2 held by deployment practice-2x: stop it first \(launcher down practice-2x\)/,
    );
    assert.deepEqual(fc.containers(), ["n1:launcher-practice-2x-r0:running", "n2:launcher-practice-2x-r1:running"]);
    assert.deepEqual(fc.nodes.map((n) => n.asked("run").length + n.asked("stopAndRemove").length + n.asked("remove").length), [1, 1], "only practice-2x's own starts");
  }));

test("two ups aimed at one lane: while one holds the lane, the other is busy at once, naming it; it touches no node and leaves the lock to its holder", () =>
  withCluster({}, async (fc) => {
    const store = new Store(":memory:");
    try {
      // The first `up` of the lane, another live process of this host (the test runner that started this one).
      const first = { pid: process.ppid, host: hostname(), what: "launcher up /recipes/slow-boot --lane side" };
      assert.equal(store.acquire([laneKey("side")], first, new Date().toISOString(), () => true).ok, true);
      const plan = fc.plan(RECIPE, { deployment: "practice-2x", lane: "side" });
      // Over the fake nodes, so that "nothing asked of any node" would see a question if one were asked.
      const host = fc.upHost(store, plan);
      await refused(
        upUseCase({ ref: "practice-2x", lane: "side" }, fc.cluster, plan, host),
        UserError,
        new RegExp(`^busy: lane side is in use by \`launcher up /recipes/slow-boot --lane side\` \\(pid ${process.ppid} on ${hostname()}, since \\S+\\)`),
        /wait for it to finish, or stop that command/,
      );
      assert.deepEqual(fc.nodes.map((n) => n.calls.length), [0, 0], "no node was asked anything");
      assert.equal(store.lockHolder(laneKey("side"))?.pid, process.ppid, "the first up still holds the lane");
    } finally {
      store.close();
    }
  }));
