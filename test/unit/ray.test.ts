import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { VLLM_NODE_ENV_KEYS } from "../../src/engine/vllm/node-env.js";
import { parseCluster } from "../../src/cluster/parse.js";
import { advanceBoot, INITIAL_BOOT } from "../../src/engine/boot-log.js";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { RAY_JOIN_CHECK, RAY_NON_CARRY_OVER_FILE, RAY_NOT_JOINED } from "../../src/engine/vllm/ray.js";
import { planDeployment, type NodeSpec } from "../../src/plan/plan.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { BASE, memorySource } from "../support/memory-source.js";

const cluster = parseCluster(
  "c.toml",
  `[[nodes]]\nname = "s1"\nhost = "h1"\nfabric_ip = "10.9.0.1"\nfabric_iface = "enp1"\n[[nodes]]\nname = "s2"\nhost = "h2"\nfabric_ip = "10.9.0.2"\nfabric_iface = "enp2"\n`,
).cluster;

function planOf(text: string): NodeSpec[] {
  const r = resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": text }));
  assert.ok(r.recipe, JSON.stringify(r.diagnostics));
  assert.ok(cluster);
  const p = planDeployment(r.recipe, cluster);
  assert.ok(p.ok, JSON.stringify(p));
  return [...p.plan.nodes];
}
const RAY_BASE = BASE.replace('distributed_backend = "mp"', 'distributed_backend = "ray"');
const rayPlan = (extra = ""): NodeSpec[] => planOf(RAY_BASE + extra);

/** The part of `docker run` after the image: what the container's entrypoint receives. */
function afterImage(spec: NodeSpec): string[] {
  const at = spec.argv.indexOf("img:local");
  return spec.argv.slice(at + 1);
}

/**
 * Runs the head's real script with sh, with `ray`, `python3` and `vllm` stand-ins on PATH that
 * record their arguments: what the head does, in order, as a container would run it.
 */
function runHead(spec: NodeSpec, env: Record<string, string>, home: string): { code: number | null; calls: string[]; stderr: string } {
  const bin = path.join(home, "bin");
  mkdirSync(bin, { recursive: true });
  const calls = path.join(home, "calls");
  for (const name of ["ray", "python3", "vllm"]) {
    // The stand-in logs "name argc args..." (python3's program text is long: only its first line).
    writeFileSync(path.join(bin, name), `#!/bin/sh\nprintf '%s' "${name}" >> "${calls}"\nfor a in "$@"; do printf ' [%s]' "$(printf '%s' "$a" | head -n 1)" >> "${calls}"; done\necho >> "${calls}"\n${name === "python3" ? 'exit "${PY_EXIT:-0}"\n' : ""}`);
    chmodSync(path.join(bin, name), 0o755);
  }
  const [flag, script, ...args] = afterImage(spec);
  assert.equal(flag, "-c");
  const r = spawnSync("sh", ["-c", script ?? "", ...args], { env: { PATH: `${bin}:/usr/bin:/bin`, HOME: home, ...env }, encoding: "utf8", timeout: 10_000 });
  let log = "";
  try {
    log = readFileSync(calls, "utf8");
  } catch {
    /* nothing ran */
  }
  return { code: r.status, calls: log.trim().split("\n").filter(Boolean), stderr: r.stderr };
}

test("Ray head: keeps every per-node fabric key out of vLLM's env carry-over, starts Ray, waits, then execs vllm serve", () => {
  const [head] = rayPlan();
  assert.ok(head);
  const home = mkdtempSync(path.join(tmpdir(), "ray-head-"));
  try {
    const r = runHead(head, {}, home);
    assert.equal(r.code, 0, r.stderr);
    // vLLM reads the list from VLLM_CONFIG_ROOT, by default ~/.config/vllm (vllm/ray/ray_env.py, vllm/envs.py).
    const listed = JSON.parse(readFileSync(path.join(home, ".config/vllm", RAY_NON_CARRY_OVER_FILE), "utf8")) as string[];
    for (const key of ["NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "UCX_NET_DEVICES", "NCCL_IB_GID_INDEX", "VLLM_HOST_IP"]) assert.ok(listed.includes(key), key);
    assert.deepEqual([...listed].sort(), [...VLLM_NODE_ENV_KEYS].sort());
    assert.deepEqual(r.calls, [
      "ray [start] [--head] [--node-ip-address=10.9.0.1] [--port=6379]",
      "python3 [-c] [import sys, time, ray] [300] [s1=10.9.0.1,s2=10.9.0.2]",
      "vllm [serve] [org/model] [--served-model-name] [served] [--max-model-len] [4096] [--enable-prefix-caching] [--distributed-executor-backend] [ray] [--tensor-parallel-size] [2] [--pipeline-parallel-size] [1] [--host] [h1] [--port] [8000]",
    ]);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test("Ray head: VLLM_CONFIG_ROOT and the recipe's wait are honoured; nodes that did not join stop the boot before vllm serve", () => {
  const [head] = rayPlan();
  assert.ok(head);
  const home = mkdtempSync(path.join(tmpdir(), "ray-head-"));
  try {
    const r = runHead(head, { VLLM_CONFIG_ROOT: path.join(home, "cfg"), LAUNCHER_RAY_JOIN_SECONDS: "7", PY_EXIT: "1" }, home);
    assert.equal(r.code, 1);
    assert.ok(JSON.parse(readFileSync(path.join(home, "cfg", RAY_NON_CARRY_OVER_FILE), "utf8")));
    assert.equal(r.calls.length, 2, "vllm serve never runs");
    assert.match(r.calls[1] ?? "", / \[7\] /);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test("Ray head: an exclusion list already in the image that lacks launcher's keys stops the boot naming them", () => {
  const [head] = rayPlan();
  assert.ok(head);
  const home = mkdtempSync(path.join(tmpdir(), "ray-head-"));
  try {
    mkdirSync(path.join(home, ".config/vllm"), { recursive: true });
    const keep = VLLM_NODE_ENV_KEYS.filter((k) => k !== "NCCL_IB_HCA");
    writeFileSync(path.join(home, ".config/vllm", RAY_NON_CARRY_OVER_FILE), `${JSON.stringify(["MY_VAR", ...keep], null, 2)}\n`);
    const r = runHead(head, {}, home);
    assert.equal(r.code, 1);
    assert.deepEqual(r.calls, [], "Ray is not started");
    assert.match(r.stderr, /ray_non_carry_over_env_vars\.json exists without NCCL_IB_HCA: vLLM would copy the head's values/);
    writeFileSync(path.join(home, ".config/vllm", RAY_NON_CARRY_OVER_FILE), JSON.stringify(["MY_VAR", ...VLLM_NODE_ENV_KEYS]));
    assert.equal(runHead(head, {}, home).code, 0, "a list that has them all is used as it is");
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test("Ray nodes: memory monitor off on unified memory unless the recipe says otherwise; workers join the head's fabric address", () => {
  const [head, worker] = rayPlan();
  assert.equal(head?.env.RAY_memory_monitor_refresh_ms, "0");
  assert.equal(worker?.env.RAY_memory_monitor_refresh_ms, "0");
  assert.deepEqual(worker && afterImage(worker), ["start", "--block", "--address=10.9.0.1:6379", "--node-ip-address=10.9.0.2"]);
  const [h2] = rayPlan('RAY_memory_monitor_refresh_ms = "250"\n');
  assert.equal(h2?.env.RAY_memory_monitor_refresh_ms, "250");
  const [, mp] = planOf(BASE);
  assert.equal(mp?.env.RAY_memory_monitor_refresh_ms, undefined, "mp has no Ray");
});

/** Runs the head's join check with real Python against a stand-in `ray` module whose nodes are `nodes`. */
function joinCheck(nodes: { ip: string; alive: boolean }[], want: string, seconds = "0"): { code: number | null; out: string } {
  const dir = mkdtempSync(path.join(tmpdir(), "ray-py-"));
  try {
    writeFileSync(
      path.join(dir, "ray.py"),
      `def init(**kw):\n    assert kw.get("address") == "auto"\ndef shutdown():\n    pass\ndef nodes():\n    return ${JSON.stringify(nodes.map((n) => ({ NodeManagerAddress: n.ip, Alive: n.alive })) ).replaceAll("true", "True").replaceAll("false", "False")}\n`,
    );
    const r = spawnSync("python3", ["-c", RAY_JOIN_CHECK, seconds, want], { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", PYTHONPATH: dir }, encoding: "utf8", timeout: 10_000 });
    return { code: r.status, out: `${r.stdout}${r.stderr}` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("the join check names the nodes missing from Ray's node table (a dead node does not count), and the boot watcher takes its line as fatal", { skip: spawnSync("python3", ["--version"]).status !== 0 && "no python3 here" }, () => {
  const ok = joinCheck([{ ip: "10.9.0.1", alive: true }, { ip: "10.9.0.2", alive: true }], "s1=10.9.0.1,s2=10.9.0.2");
  assert.equal(ok.code, 0, ok.out);
  assert.match(ok.out, /launcher: all 2 Ray nodes joined/);
  const missing = joinCheck([{ ip: "10.9.0.1", alive: true }, { ip: "10.9.0.2", alive: false }], "s1=10.9.0.1,s2=10.9.0.2,s3=10.9.0.3");
  assert.equal(missing.code, 1);
  const line = missing.out.trim().split("\n").at(-1) ?? "";
  assert.ok(line.startsWith(`${RAY_NOT_JOINED} 0 s: s2 (10.9.0.2), s3 (10.9.0.3)`), line);
  const state = advanceBoot(vllm, INITIAL_BOOT, line);
  assert.equal(state.fatal, line);
});

test("preflight asks the image for ray only with the Ray backend, and the fix names ray[cgraph]", () => {
  const recipe = resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": RAY_BASE })).recipe;
  const mp = resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": BASE })).recipe;
  assert.ok(recipe && mp);
  assert.deepEqual(vllm.image.probes?.({ backend: mp.distributed_backend }), []);
  const [probe] = vllm.image.probes?.({ backend: recipe.distributed_backend }) ?? [];
  assert.deepEqual(probe?.argv, ["ray", "--version"]);
  assert.match(probe?.problem("img:local") ?? "", /^image img:local has no `ray` command.*pip install "ray\[cgraph\]"/);
});
