import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import type { EngineRecipe, RankContext } from "../../src/engine/adapter.js";
import { advanceBoot, INITIAL_BOOT } from "../../src/engine/boot-log.js";
import { detectFabric, parseIp } from "../../src/cluster/detect.js";
import { folderTree, readHcas } from "../../src/cluster/sysfs.js";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { fabricStartScript, START_SCRIPT_NAME } from "../../src/export/fabric-start.js";
import { RAY_COUNT_CHECK, RAY_HEAD_UNREACHED, RAY_HEAD_WAIT, RAY_NON_CARRY_OVER_FILE, RAY_NOT_JOINED } from "../../src/engine/vllm/ray.js";

/*
 * vLLM's Ray backend where no node's address is known before the ranks start (a Kubernetes export):
 * the head's and a worker's scripts run with sh, with stand-ins for ray, python3 and vllm that
 * record their arguments, and the two Python programs run with real Python.
 */

const RECIPE: EngineRecipe = { model: "org/model", docker_image: "img", tensor_parallel_size: 2, pipeline_parallel_size: 1, distributed_backend: "ray", args: ["--max-model-len", "4096"], env: {} };
const ctx = (rank: number): RankContext => ({ rank, nnodes: 3, masterAddr: "lws-0.lws", masterPort: 29501, apiPort: 8000, apiHost: "10.1.0.5", nodes: [{ name: "a" }, { name: "b" }, { name: "c" }], addressesAtStart: true });
const HAS_PYTHON = spawnSync("python3", ["--version"]).status === 0;

/**
 * Runs one rank's command as its container would (entrypoint sh), with recording stand-ins on PATH;
 * `under`: a script it runs under, as the export's start script (`sh -c SCRIPT NAME COMMAND...`).
 */
function run(rank: number, env: Record<string, string>, home: string, under: readonly string[] = []): { code: number | null; calls: string[]; stderr: string } {
  const cmd = vllm.rankCommand(RECIPE, ctx(rank));
  assert.deepEqual(cmd.entrypoint, ["sh"]);
  const bin = path.join(home, "bin");
  mkdirSync(bin, { recursive: true });
  const calls = path.join(home, "calls");
  for (const name of ["ray", "python3", "vllm"]) {
    writeFileSync(path.join(bin, name), `#!/bin/sh\nprintf '%s' "${name}" >> "${calls}"\nfor a in "$@"; do printf ' [%s]' "$(printf '%s' "$a" | head -n 1)" >> "${calls}"; done\necho >> "${calls}"\n${name === "python3" ? 'exit "${PY_EXIT:-0}"\n' : ""}`);
    chmodSync(path.join(bin, name), 0o755);
  }
  const argv = under.length === 0 ? ["sh", ...cmd.command] : [...under, "sh", ...cmd.command];
  const r = spawnSync(argv[0] as string, argv.slice(1), { env: { PATH: `${bin}:/usr/bin:/bin`, HOME: home, ...env }, encoding: "utf8", timeout: 10_000 });
  let log = "";
  try {
    log = readFileSync(calls, "utf8");
  } catch {
    /* nothing ran */
  }
  return { code: r.status, calls: log.trim().split("\n").filter(Boolean), stderr: r.stderr };
}

function inHome<T>(body: (home: string) => T): T {
  const home = mkdtempSync(path.join(tmpdir(), "ray-count-"));
  try {
    return body(home);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

const SERVE = "vllm [serve] [org/model] [--max-model-len] [4096] [--distributed-executor-backend] [ray] [--tensor-parallel-size] [2] [--pipeline-parallel-size] [1] [--host] [10.1.0.5] [--port] [8000]";

test("by count, the Ray head takes its node's address from RAY_NODE_IP_ADDRESS (the export's start script sets it), waits for nnodes alive, then serves", () => {
  inHome((home) => {
    const r = run(0, { RAY_NODE_IP_ADDRESS: "192.168.177.11" }, home);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.calls, ["ray [start] [--head] [--node-ip-address=192.168.177.11] [--port=6379]", "python3 [-c] [import sys, time, ray] [300] [3]", SERVE]);
    assert.ok(JSON.parse(readFileSync(path.join(home, ".config/vllm", RAY_NON_CARRY_OVER_FILE), "utf8")), "the carry-over exclusions are written as on launcher's own boot");
  });
  inHome((home) => {
    const r = run(0, { LAUNCHER_RAY_JOIN_SECONDS: "9" }, home);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.calls, ["ray [start] [--head] [--port=6379]", "python3 [-c] [import sys, time, ray] [9] [3]", SERVE], "no fabric found: Ray picks the node's address itself");
  });
  inHome((home) => {
    const r = run(0, { PY_EXIT: "1" }, home);
    assert.equal(r.code, 1);
    assert.equal(r.calls.length, 2, "vllm serve never runs when the nodes did not join");
  });
});

test("by count, a Ray worker waits for the head's port, then joins with its own node's address; one that never reaches it ends", () => {
  inHome((home) => {
    const r = run(2, { RAY_NODE_IP_ADDRESS: "192.168.177.13" }, home);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.calls, ["python3 [-c] [import socket, sys, time] [lws-0.lws] [6379] [300]", "ray [start] [--block] [--address=lws-0.lws:6379] [--node-ip-address=192.168.177.13]"]);
  });
  inHome((home) => {
    const r = run(1, { PY_EXIT: "1" }, home);
    assert.equal(r.code, 1);
    assert.equal(r.calls.length, 1, "ray start never runs");
  });
  assert.deepEqual(vllm.rankCommand(RECIPE, ctx(1)), vllm.rankCommand(RECIPE, ctx(2)), "every worker runs one command: one LWS worker template");
});

test("with every address known (launcher's SSH path), the Ray ranks are as before: a worker names its own address, the head each node's", () => {
  const known: RankContext = { ...ctx(1), nodeIp: "10.9.0.2", nodes: [{ name: "a", ip: "10.9.0.1" }, { name: "b", ip: "10.9.0.2" }, { name: "c", ip: "10.9.0.3" }] };
  const { addressesAtStart: _, ...ssh } = known;
  assert.deepEqual(vllm.rankCommand(RECIPE, ssh), { entrypoint: ["ray"], command: ["start", "--block", "--address=lws-0.lws:6379", "--node-ip-address=10.9.0.2"], env: { RAY_memory_monitor_refresh_ms: "0" } });
  assert.ok(vllm.rankCommand(RECIPE, { ...ssh, rank: 0 }).command.includes("a=10.9.0.1,b=10.9.0.2,c=10.9.0.3"));
});

test("under the export's start script, the Ray head and a worker join with the fabric address the script detects on their node", () => {
  // test/fixtures/spark/two-ports-gid3: doctor's detection finds the fabric IP below there (test/unit/fabric.test.ts).
  const root = path.resolve("test/fixtures/spark/two-ports-gid3");
  const ifaces = parseIp(readFileSync(path.join(root, "ip-link.txt"), "utf8"), readFileSync(path.join(root, "ip-addr.txt"), "utf8"));
  const ip = detectFabric({ name: "n", rank: 0, host: "n", hca: [], gpus: 1 }, readHcas(folderTree(root)), ifaces, true).facts.fabric_ip;
  assert.ok(ip);
  const under = ["sh", "-c", fabricStartScript(vllm, RECIPE), START_SCRIPT_NAME];
  inHome((home) => {
    const r = run(0, { LAUNCHER_SYSFS_ROOT: root }, home, under);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.calls[0], `ray [start] [--head] [--node-ip-address=${ip}] [--port=6379]`);
  });
  inHome((home) => {
    const r = run(1, { LAUNCHER_SYSFS_ROOT: root }, home, under);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.calls[1], `ray [start] [--block] [--address=lws-0.lws:6379] [--node-ip-address=${ip}]`);
  });
});

/** RAY_COUNT_CHECK with real Python against a stand-in `ray` module whose node table is `alive`. */
function countCheck(alive: boolean[], want: number): { code: number | null; out: string } {
  const dir = mkdtempSync(path.join(tmpdir(), "ray-py-"));
  try {
    const nodes = alive.map((a, i) => `{"NodeManagerAddress": "10.0.0.${i}", "Alive": ${a ? "True" : "False"}}`).join(", ");
    writeFileSync(path.join(dir, "ray.py"), `def init(**kw):\n    assert kw.get("address") == "auto"\ndef shutdown():\n    pass\ndef nodes():\n    return [${nodes}]\n`);
    const r = spawnSync("python3", ["-c", RAY_COUNT_CHECK, "0", String(want)], { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", PYTHONPATH: dir }, encoding: "utf8", timeout: 10_000 });
    return { code: r.status, out: `${r.stdout}${r.stderr}` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("the count check counts alive nodes only, and its failure is the boot's fatal line", { skip: !HAS_PYTHON && "no python3 here" }, () => {
  const ok = countCheck([true, true, true], 3);
  assert.equal(ok.code, 0, ok.out);
  assert.match(ok.out, /launcher: all 3 Ray nodes joined/);
  const short = countCheck([true, false, true], 3);
  assert.equal(short.code, 1);
  const line = short.out.trim().split("\n").at(-1) ?? "";
  assert.ok(line.startsWith(`${RAY_NOT_JOINED} 0 s: 2 of 3 nodes alive`), line);
  assert.equal(advanceBoot(vllm, INITIAL_BOOT, line).fatal, line);
});

test("the worker's wait for the head: done once the port accepts, a fatal line naming it once the time is up", { skip: !HAS_PYTHON && "no python3 here" }, async () => {
  const server = createServer((s) => s.destroy());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const wait = (p: number, seconds: string): Promise<{ code: number | null; out: string }> =>
    // Asynchronous: the listening server answers on this process's loop while Python dials it.
    new Promise((resolve) => {
      execFile("python3", ["-c", RAY_HEAD_WAIT, "127.0.0.1", String(p), seconds], { timeout: 10_000 }, (e, stdout, stderr) => resolve({ code: e === null ? 0 : typeof e.code === "number" ? e.code : null, out: `${stdout}${stderr}` }));
    });
  try {
    const up = await wait(port, "5");
    assert.equal(up.code, 0, up.out);
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  const down = await wait(port, "0");
  assert.equal(down.code, 1);
  const line = down.out.trim().split("\n").at(-1) ?? "";
  assert.ok(line.startsWith(`${RAY_HEAD_UNREACHED} 0 s: 127.0.0.1:${port} (`), line);
  assert.equal(advanceBoot(vllm, INITIAL_BOOT, line).fatal, line);
});
