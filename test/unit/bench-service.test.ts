import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { benchDeps, benchTarget } from "../../src/measure/bench/bench.js";
import type { BenchRun } from "../../src/contract/evidence.js";
import { cliArgs } from "../built-cli.js";

// bench against an OpenAI-compatible URL with no cluster to read: a Kubernetes Service of
// `launcher export k8s` (through `kubectl port-forward`), where no node runs launcher's containers.

const require = createRequire(import.meta.url);
const { createApi } = require("../../docker-images/practice-engine/lib/http.js") as {
  createApi: (o: Record<string, unknown>) => { server: Server; listen: (h: string, p: number) => Promise<void>; close: () => void };
};
const dir = mkdtempSync(path.join(tmpdir(), "launcher-bench-service-"));
after(() => rmSync(dir, { recursive: true, force: true }));

async function engine(): Promise<{ url: string; close: () => void }> {
  const api = createApi({ model: "practice/tiny", servedNames: ["practice"], maxModelLen: 4096, kvTokens: 100000, tokensPerSec: 2000, startTime: 0, apiKeys: [] });
  await api.listen("127.0.0.1", 0);
  return { url: `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`, close: () => api.close() };
}

test("bench through a URL without a cluster: TARGET is the model asked for, the run is stored under its name", async () => {
  const e = await engine();
  try {
    const saved: BenchRun[] = [];
    const store = { saveBenchRun: (r: BenchRun) => saved.push(r), history: () => [], engineKey: () => undefined };
    const options = { target: "practice", concurrencies: [1], requests: 2, inputLen: 8, outputLen: 4, depth: 0, runs: 1, requestTimeoutS: 30, signal: new AbortController().signal, gateway: { url: e.url } };
    const runs = await benchTarget(options, benchDeps(undefined, store));
    assert.equal(runs[0]?.results[0]?.completed, 2, JSON.stringify(runs[0]?.results[0]?.errors));
    assert.deepEqual(runs[0]?.subject, { target: "practice" });
    assert.equal(saved.length, 1);
    // Neither a cluster nor a URL: nothing to send to.
    await assert.rejects(benchTarget({ ...options, gateway: undefined } as never, benchDeps(undefined, store)), /no cluster to find it on/);
  } finally {
    e.close();
  }
});

test("launcher bench MODEL --gateway URL with no cluster file anywhere", async () => {
  const e = await engine();
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: "", XDG_CONFIG_HOME: path.join(dir, "config"), XDG_STATE_HOME: path.join(dir, "state"), HOME: dir };
    delete env.LAUNCHER_CLUSTER;
    const child = spawn(process.execPath, [...cliArgs(), "bench", "practice", "--gateway", e.url, "--requests", "2", "--output-len", "4", "--input-len", "8", "--json"], { cwd: dir, env });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    assert.equal(code, 0, stderr);
    const answer = JSON.parse(stdout) as { runs: { subject: { target: string }; results: { completed: number }[] }[] };
    assert.deepEqual(answer.runs[0]?.subject, { target: "practice" });
    assert.equal(answer.runs[0]?.results[0]?.completed, 2);
  } finally {
    e.close();
  }
});
