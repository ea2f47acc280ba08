import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { launcher, launcherContainers, ok, onHost, practiceSuite, variant, within } from "./practice-cluster.js";

// distributed_backend = "ray" on the practice cluster, with the practice engine's Ray stand-in
// (docker-images/practice-engine/lib/ray.js): a boot that serves, a worker that never joins, an
// image without Ray, a worker's node that dies after the boot served. 2 hosts: one head, one worker.
const HOSTS = 2;
const dir = practiceSuite(HOSTS, "launcher-ray-");

/** The practice recipe on the Ray backend (the parent's `--distributed-executor-backend mp` dropped). */
const rayRecipe = (name: string, top: string, env: string): string =>
  variant(dir, name, "practice-2x", `distributed_backend = "ray"\nremove_args = ["--distributed-executor-backend"]\n${top}[env]\n${env}`);

const containerLog = (host: number, name: string): string => onHost(host, ["sh", "-c", 'docker logs "$1" 2>&1', "sh", name]);

describe("Ray backend on the practice cluster", { concurrency: false }, () => {
  test("Ray boots: head up first, the worker joins over the fabric, one vllm serve; workers keep their own fabric env; memory monitor off", async () => {
    const recipe = rayRecipe("ray-ok", "", 'LAUNCHER_RAY_JOIN_SECONDS = "30"\n');
    try {
      ok(await launcher(["up", recipe, "--name", "ray-ok"], 180_000), "up");
      const head = containerLog(1, "launcher-ray-ok-r0");
      assert.match(head, /Ray runtime started\./);
      assert.match(head, /launcher: all 2 Ray nodes joined/);
      // vLLM's carry-over read launcher's exclusion list: no per-node fabric key goes to the worker.
      const excluded = /RAY_NON_CARRY_OVER_ENV_VARS from config: \{([^}]*)\}/.exec(head)?.[1] ?? "";
      for (const key of ["NCCL_SOCKET_IFNAME", "UCX_NET_DEVICES", "VLLM_HOST_IP"]) assert.match(excluded, new RegExp(`'${key}'`));
      const copied = /Copying the following environment variables to workers: \[([^\]]*)\]/.exec(head)?.[1];
      assert.ok(copied !== undefined, head);
      assert.doesNotMatch(copied, /NCCL_SOCKET_IFNAME|UCX_NET_DEVICES/);
      assert.match(containerLog(2, "launcher-ray-ok-r1"), /Ray runtime started\./);
      const env = onHost(2, ["docker", "inspect", "--format", "{{range .Config.Env}}{{println .}}{{end}}", "launcher-ray-ok-r1"]);
      assert.match(env, /^RAY_memory_monitor_refresh_ms=0$/m);

      // The worker's node dies after the boot served: the head fails with Ray's ActorDiedError
      // naming that node's IP (the practice engine's lib/ray-executor.js, as vLLM's Ray executor
      // raises it), and explain, given both nodes' logs, names the node by the IP its `ray start` printed.
      onHost(2, ["docker", "kill", "launcher-ray-ok-r1"]);
      await within(20_000, "the head's container ended", async () => (/^(?:exited|dead)$/m.test(onHost(1, ["docker", "inspect", "--format", "{{.State.Status}}", "launcher-ray-ok-r0"])) ? true : undefined));
      const logs = ok(await launcher(["logs", "ray-ok"]), "logs");
      assert.match(logs.stdout, /^\[n1\] .*ray\.exceptions\.ActorDiedError: The actor died unexpectedly/m, logs.stdout);
      const file = path.join(dir, "ray-lost.log");
      writeFileSync(file, logs.stdout);
      const text = await launcher(["explain", file]);
      assert.equal(text.code, 1, text.stderr);
      assert.match(text.stdout, /^the engine reached serving on n2 \(n1's log says this node died\), then failed$/m, text.stdout);
      assert.match(text.stdout, /^cause: RayWorkerProc on \d+\.\d+\.\d+\.\d+: The actor is dead because its node has died/m);
      assert.match(text.stdout, /^hint: Ray lost the node at \d+\.\d+\.\d+\.\d+/m);
    } finally {
      await launcher(["down", "ray-ok", "--grace", "1"]);
    }
  });

  test("a worker that never joins fails the boot within the bound, naming it; vllm serve never starts; everything rolled back", async () => {
    const recipe = rayRecipe("ray-nojoin", "", 'LAUNCHER_RAY_JOIN_SECONDS = "4"\nPRACTICE_RAY_NO_JOIN = "1"\n');
    try {
      const r = await launcher(["up", recipe, "--name", "ray-nojoin"], 180_000);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /boot of ray-nojoin failed/);
      assert.match(r.stderr, /launcher: Ray nodes not joined after 4 s: n2 \(\d+\.\d+\.\d+\.\d+\)/);
      assert.doesNotMatch(r.stderr, /Application startup complete/);
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      // Only if the boot wrongly succeeded: ray-nojoin must not hold the nodes for the next test.
      await launcher(["down", "deployment/ray-nojoin", "--grace", "1"]);
    }
  });

  test("an image without ray is refused by preflight, naming the image and ray[cgraph], before any container starts", async () => {
    // The practice image minus its `ray` (node, which is the image's vllm, deletes the file).
    const dockerfile = 'FROM practice-engine:local\nRUN ["/usr/local/bin/vllm", "-e", "require(\\"fs\\").unlinkSync(\\"/usr/local/bin/ray\\")"]\n';
    onHost(1, ["sh", "-c", 'printf "%s" "$1" | docker build --quiet --tag practice-noray:local -', "sh", dockerfile]);
    try {
      const recipe = rayRecipe("ray-noimage", 'docker_image = "practice-noray:local"\n', 'LAUNCHER_RAY_JOIN_SECONDS = "4"\n');
      const r = await launcher(["up", recipe, "--name", "ray-noimage"], 180_000);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /preflight failed for ray-noimage; no container was started/);
      assert.match(r.stderr, /image practice-noray:local has no `ray` command.*pip install "ray\[cgraph\]"/);
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      for (const host of [1, 2]) onHost(host, ["sh", "-c", "docker image rm --force practice-noray:local >/dev/null 2>&1 || true"]);
    }
  });
});
