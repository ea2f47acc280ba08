import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { launcher, launcherContainers, ok, onHost, practiceSuite, variant } from "./practice-cluster.js";

// llama.cpp on the practice cluster: the practice engine's llama.cpp persona (rpc-server on the
// worker, llama-server --rpc on the head), booted, failed and refused as llama.cpp is.
const HOSTS = 2;
const dir = practiceSuite(HOSTS, "launcher-llamacpp-it-");
const BASE = "practice-llamacpp-2x";

/** When docker says a container started, and when its log said a line (RFC 3339 times of the node's clock). */
const startedAt = (host: number, container: string): number => Date.parse(onHost(host, ["docker", "inspect", "--format", "{{.State.StartedAt}}", "--", container]).trim());
function lineAt(host: number, container: string, pattern: RegExp): number | undefined {
  const line = onHost(host, ["docker", "logs", "--timestamps", container]).split("\n").find((l) => pattern.test(l));
  return line === undefined ? undefined : Date.parse(line.split(" ")[0] ?? "");
}

describe("llama.cpp on the practice cluster", { concurrency: false }, () => {
  test("a 2-node llama.cpp RPC boot: rpc-server on the worker's fabric address, the head started once its port accepts, ready and serving chat", async () => {
    // The worker's device takes 3 s to start before rpc-server listens: a head started as soon as
    // the worker's container runs would find nothing to connect to ("Failed to connect to"). And
    // rpc-server's stdout (a pipe) holds its banner until its first client connects: a head that
    // waited for a worker's log line would wait for itself.
    const recipe = variant(dir, "lc-ok", BASE, '[env]\nPRACTICE_RPC_INIT_MS = "3000"\n');
    try {
      const up = await launcher(["up", recipe]);
      assert.equal(up.code, 0, up.stderr);
      const worker = "launcher-lc-ok-r1";
      const head = "launcher-lc-ok-r0";
      const args = onHost(2, ["docker", "inspect", "--format", "{{json .Args}}", "--", worker]);
      assert.match(args, /"--host","10\.232\.0\.\d+"/, "bound to the fabric address");
      assert.doesNotMatch(args, /0\.0\.0\.0/);
      // The first client is launcher's probe from the head's node, which flushed the worker's
      // stdout; the head's own connection comes later. Both hosts are namespaces of one machine: one clock.
      const accepted = lineAt(2, worker, /^\S+ Accepted client connection$/);
      assert.ok(accepted !== undefined, "the worker accepted the probe");
      assert.ok(startedAt(1, head) >= accepted, "the head started after the worker's port accepted");
      assert.ok(startedAt(1, head) >= startedAt(2, worker) + 3000, "not before the worker's device started");
      // llama-server writes its log on stderr (common/log.cpp).
      const headLog = onHost(1, ["sh", "-c", `docker logs ${head} 2>&1`]);
      assert.match(headLog, /using device RPC0 \(10\.232\.0\.\d+:\d+\)/);
      const status = JSON.parse(ok(await launcher(["status", "--json"]), "status").stdout) as { deployments: { deployment: string; engine?: string; status: string }[] };
      const d = status.deployments.find((x) => x.deployment === "lc-ok");
      assert.equal(d?.engine, "llamacpp");
      assert.equal(d?.status, "serving");
    } finally {
      ok(await launcher(["down", "deployment/lc-ok", "--grace", "1"]), "down");
    }
    assert.deepEqual(launcherContainers(HOSTS), []);
  });

  test("a failed llama.cpp boot is rolled back with its root cause named: the GGUF file the head cannot open", async () => {
    const recipe = variant(dir, "lc-missing", BASE, 'model = "/models/absent-00001-of-00002.gguf"\n');
    const up = await launcher(["up", recipe]);
    assert.equal(up.code, 1, up.stderr);
    assert.match(up.stderr, /boot of lc-missing failed/);
    assert.match(up.stderr, /cause: gguf_init_from_file: failed to open GGUF file '\/models\/absent-00001-of-00002\.gguf'/);
    assert.match(up.stderr, /hint: the GGUF file is not where the recipe's model says/);
    assert.match(up.stderr, /rolled back/);
    assert.deepEqual(launcherContainers(HOSTS), []);
  });

  test("a worker whose rpc-server cannot listen: the worker is blamed with its own cause, not the head", async () => {
    const recipe = variant(dir, "lc-worker", BASE, '[env]\nPRACTICE_FAULT = "worker_exit"\nPRACTICE_FAULT_RANK = "1"\n');
    const up = await launcher(["up", recipe, "--timeout", "60"]);
    assert.equal(up.code, 1, up.stderr);
    assert.match(up.stderr, /\(rank 1\)/);
    assert.match(up.stderr, /Failed to create server socket/);
    assert.deepEqual(launcherContainers(HOSTS), []);
  });

  test("a worker that never listens: the boot times out blaming it, not the head that waits for it", async () => {
    const recipe = variant(dir, "lc-hang", BASE, '[env]\nPRACTICE_FAULT = "hang"\nPRACTICE_FAULT_RANK = "1"\n');
    const up = await launcher(["up", recipe, "--timeout", "15"]);
    assert.equal(up.code, 1, up.stderr);
    assert.match(up.stderr, /boot of lc-hang failed: timed out after 15 s: its port 10\.232\.0\.\d+:\d+ never accepted a connection from the head's node n1/);
    assert.match(up.stderr, /n2 \(rank 1\)/);
    assert.deepEqual(launcherContainers(HOSTS), []);
  });

  test("a recipe key llama.cpp does not read is refused at validate, naming the engine that ignores it", async () => {
    const recipe = variant(dir, "lc-strict", BASE, 'distributed_backend = "ray"\n[env]\nVLLM_USE_V1 = "1"\n');
    const r = await launcher(["validate", recipe]);
    assert.equal(r.code, 1);
    assert.match(r.stderr + r.stdout, /distributed_backend is not read by llama\.cpp: engine = "llamacpp" ignores it/);
    assert.match(r.stderr + r.stdout, /env VLLM_USE_V1 is read only by vLLM/);
  });
});
