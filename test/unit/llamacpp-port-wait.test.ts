import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { startedRanks } from "../../src/boot/up.js";
import { awaitedPorts, awaitPorts, portProbeArgv, probePort, type PortAwaited } from "../../src/boot/port-wait.js";
import type { ExecResult, Transport } from "../../src/remote/transport.js";
import { UnreachableError } from "../../src/remote/transport.js";
import { llamacpp } from "../../src/engine/llamacpp/adapter.js";
import { workerAddressProblem } from "../../src/engine/llamacpp/command.js";
import { RPC_WAIT, RPC_WAIT_NAME, RPC_WAIT_SECONDS_ENV } from "../../src/engine/llamacpp/at-start.js";
import { UserError } from "../../src/config/errors.js";

const W1: PortAwaited = { node: "spark2", rank: 1, ip: "10.0.0.2", port: 29501 };
const W2: PortAwaited = { node: "spark3", rank: 2, ip: "10.0.0.3", port: 29501 };
const never = new Promise<never>(() => undefined);

test("the probe: bash's /dev/tcp from the head's node, bounded by timeout(1), the address passed as words, never in the script", () => {
  const argv = portProbeArgv("10.0.0.2", 29501);
  assert.deepEqual(argv, ["timeout", "2", "bash", "-c", 'exec 3<>"/dev/tcp/$1/$2"', "launcher-port-probe", "10.0.0.2", "29501"]);
  assert.throws(() => portProbeArgv("10.0.0.2; rm -rf /", 29501));
  assert.throws(() => portProbeArgv("10.0.0.2", 0));
});

function transport(codes: number[]): Transport & { calls: (readonly string[])[] } {
  const calls: (readonly string[])[] = [];
  return {
    node: "spark1",
    calls,
    exec: async (argv): Promise<ExecResult> => (calls.push(argv), { code: codes.shift() ?? 1, stdout: "", stderr: "ssh: connect to host spark1: Connection refused" }),
    stream: () => (async function* () {})(),
    spawn: () => {
      throw new Error("unused");
    },
  };
}

test("probePort: 0 accepts; a refusal (1) or timeout(1)'s 124 is not yet; ssh's 255 is the head's node unreachable", async () => {
  const signal = new AbortController().signal;
  assert.equal(await probePort(transport([0]), "10.0.0.2", 29501, signal), true);
  assert.equal(await probePort(transport([1]), "10.0.0.2", 29501, signal), false);
  assert.equal(await probePort(transport([124]), "10.0.0.2", 29501, signal), false);
  await assert.rejects(probePort(transport([255]), "10.0.0.2", 29501, signal), (e: unknown) => e instanceof UnreachableError && e.node === "spark1");
});

test("the head's wait: each worker in rank order until its port accepts, naming the one waited for, none once all accept", async () => {
  const answers = new Map([["spark2", [false, false, true]], ["spark3", [true]]]);
  const probed: string[] = [];
  const waited: (string | undefined)[] = [];
  await awaitPorts([W1, W2], async (w) => (probed.push(w.node), answers.get(w.node)?.shift() ?? false), never, (w) => waited.push(w?.node), 1);
  assert.deepEqual(probed, ["spark2", "spark2", "spark2", "spark3"]);
  assert.deepEqual(waited, ["spark2", "spark3", undefined]);
});

test("the head's wait ends with the watch's failure (a worker that died, the boot's timeout), still naming the worker it waited for", async () => {
  let fail: (e: Error) => void = () => undefined;
  const until = new Promise<never>((_, reject) => (fail = reject));
  let waiting: PortAwaited | undefined;
  const wait = awaitPorts([W1], async () => false, until, (w) => (waiting = w), 1);
  setImmediate(() => fail(new Error("watch ended")));
  await assert.rejects(wait, /watch ended/);
  assert.equal(waiting?.node, "spark2", "the timeout blames the worker whose port never accepted");
});

test("the ports come from the cluster file: master_port at each worker's fabric_ip", () => {
  const cluster = [{ name: "spark1", fabric_ip: "10.0.0.1" }, { name: "spark2", fabric_ip: "10.0.0.2" }, { name: "spark3" }];
  assert.deepEqual(awaitedPorts(29501, cluster, ["spark2"], () => 1), [W1]);
  assert.throws(() => awaitedPorts(29501, cluster, ["spark3"], () => 2), /spark3 has no fabric_ip/);
});

test("the timeout's blame looks only at ranks started: a head never started (waiting for its workers) holds nothing up", () => {
  const nodes = [{ node: "spark1" }, { node: "spark2" }, { node: "spark3" }];
  assert.deepEqual(startedRanks(nodes, new Set(["spark2", "spark3"])), [{ node: "spark2" }, { node: "spark3" }]);
  assert.deepEqual(startedRanks(nodes, new Set()), nodes, "none started yet: every rank may be blamed");
});

test("llama.cpp's head waits for its workers' ports, not their logs", () => {
  assert.equal(llamacpp.headAwaitsWorkersPort, true);
});

test("a worker's fabric_ip: IPv4, never the unspecified or a loopback address, else a user error naming the node and the field", () => {
  assert.equal(workerAddressProblem("10.0.0.2"), undefined);
  assert.match(workerAddressProblem("0.0.0.0") ?? "", /unspecified/);
  assert.match(workerAddressProblem("127.0.0.1") ?? "", /loopback/);
  assert.match(workerAddressProblem("::") ?? "", /not an IPv4 address/);
  assert.match(workerAddressProblem("fd00::2") ?? "", /not an IPv4 address/);
  const ctx = { rank: 1, nnodes: 2, masterAddr: "10.0.0.1", masterPort: 29501, apiPort: 8000, apiHost: "10.0.0.1", nodeIp: "0.0.0.0", nodes: [{ name: "spark1", ip: "10.0.0.1" }, { name: "spark2", ip: "0.0.0.0" }] };
  const recipe = { model: "/m.gguf", args: [], env: {} } as never;
  assert.throws(
    () => llamacpp.rankCommand(recipe, ctx),
    (e: unknown) => e instanceof UserError && /node spark2: fabric_ip "0\.0\.0\.0"/.test(e.message) && /fabric_ip for spark2 in the cluster file/.test(e.hint ?? ""),
  );
  assert.throws(() => llamacpp.rankCommand(recipe, { ...ctx, nodeIp: "fd00::2" }), (e: unknown) => e instanceof UserError && /IPv4/.test(e.message));
});

test("the exported head's wait takes LAUNCHER_RPC_WAIT_SECONDS as digits only: bash runs a[$(cmd)] inside $((...))", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "rpc-wait-"));
  const marker = path.join(dir, "ran");
  const run = (value: string): ReturnType<typeof spawnSync> =>
    spawnSync("bash", ["-c", RPC_WAIT, RPC_WAIT_NAME, "1", "127.0.0.1:1", "true"], { env: { PATH: process.env.PATH, [RPC_WAIT_SECONDS_ENV]: value }, encoding: "utf8", timeout: 10_000 });
  try {
    const r = run(`a[$(touch ${marker})]`);
    assert.equal(r.status, 1);
    assert.match(String(r.stderr), /LAUNCHER_RPC_WAIT_SECONDS must be a whole number of seconds/);
    assert.equal(existsSync(marker), false, "the env's command never ran");
    assert.equal(run("").status, 1);
    // Digits: the wait runs (port 1 refuses) and says it was not reached.
    assert.match(String(run("0").stderr), /RPC worker not reached after 0 s: 127\.0\.0\.1:1/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
