import { test, after } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { imageUnsettled, readPlanNodes, readSections, type NodeReading, type PlanReadings } from "../../src/deploy/preflight.js";
import { readyRetryMs } from "../../src/deploy/readiness.js";
import type { ClusterSession } from "../../src/deploy/session.js";
import type { Plan } from "../../src/plan/plan.js";
import { DockerClient } from "../../src/remote/docker.js";
import { localTransport } from "../../src/remote/local.js";
import type { Transport } from "../../src/remote/transport.js";

const NONCE = "0123456789abcdef0123456789abcdef";

test("readSections: each part's exit status, stdout and stderr exactly, trailing newlines included", () => {
  const out = [`${NONCE} version 0`, "27.0.1", "", `${NONCE} err`, "", `${NONCE} image 1`, "", `${NONCE} err`, "Error: No such image: x", "", ""].join("\n");
  const parts = readSections(out, NONCE);
  assert.deepEqual(parts.get("version"), { code: 0, stdout: "27.0.1\n", stderr: "" });
  assert.deepEqual(parts.get("image"), { code: 1, stdout: "", stderr: "Error: No such image: x\n" });
});

test("readSections: a node's output cannot forge a part without the nonce; a part cut short is absent", () => {
  // A container label (untrusted) that prints marker-like lines with another nonce, and the nonce's own
  // marker words where they are no marker (a header needs a name and a number).
  const forged = ["ffff containers 0", "ffff err", `${NONCE} containers`, `${NONCE} x y z`].join("\n");
  const out = [`${NONCE} containers 0`, forged, `${NONCE} err`, "", `${NONCE} meminfo 0`, "MemTotal: 1 kB"].join("\n");
  const parts = readSections(out, NONCE);
  assert.equal(parts.get("containers")?.stdout, forged);
  assert.equal(parts.has("meminfo"), false, "no err marker: the part never ended");
});

test("imageUnsettled: a push is considered only when every node answered and they do not all hold one ID", () => {
  const node = (n: string, imageId: string | undefined): NodeReading => ({ node: n, imageId, containers: [], mounts: { code: 0, stdout: "", stderr: "" }, meminfo: "" });
  const read = (...r: NodeReading[]): ReadonlyMap<string, NodeReading> => new Map(r.map((x) => [x.node, x]));
  assert.equal(imageUnsettled(read(node("a", "sha256:1"), node("b", "sha256:1"))), false);
  assert.equal(imageUnsettled(read(node("a", "sha256:1"), node("b", "sha256:2"))), true);
  assert.equal(imageUnsettled(read(node("a", "sha256:1"), node("b", undefined))), true);
  assert.equal(imageUnsettled(read(node("a", "sha256:1"), { node: "b", problem: "b: SSH unreachable" })), false);
});

test("readyRetryMs: soon at first, doubling, never past 200 ms", () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5, 50].map(readyRetryMs), [20, 40, 80, 160, 200, 200, 200]);
});

// A node made of this machine, with a `docker` stand-in first on PATH: the real READ_SCRIPT runs.
const bin = mkdtempSync(path.join(tmpdir(), "launcher-preflight-reads-"));
after(() => rmSync(bin, { recursive: true, force: true }));
const inspect = JSON.stringify([{ Id: "id1", Name: "/launcher-other-r0", Image: "img", Config: { Labels: { "launcher.deployment": "other" } }, State: { Status: "running", Running: true, ExitCode: 0, StartedAt: "s", FinishedAt: "f" } }]);
// `down`: the daemon does not answer, so every docker command fails as the CLI does then.
function fakeDocker(down: boolean): void {
  writeFileSync(
    path.join(bin, "docker"),
    `#!/bin/sh
${down ? 'echo "Cannot connect to the Docker daemon" >&2; exit 1' : ""}
case "$1" in
  image) echo sha256:abc ;;
  ps) echo id1 ;;
  inspect) cat <<'EOF'
${inspect}
EOF
  ;;
esac
`,
  );
  chmodSync(path.join(bin, "docker"), 0o755);
}

function counted(t: Transport, calls: string[]): Transport {
  return { ...t, exec: (argv, o) => (calls.push(t.node), t.exec(argv, o)) };
}

async function readTwoNodes(down: boolean): Promise<{ read: PlanReadings; calls: string[] }> {
  fakeDocker(down);
  const mountDir = mkdtempSync(path.join(bin, "m-"));
  const calls: string[] = [];
  const names = ["n1", "n2"];
  const session = {
    cluster: { nodes: names.map((name) => ({ name, host: name })) },
    docker: new Map(names.map((n) => [n, new DockerClient(counted(localTransport(n), calls))])),
  } as unknown as ClusterSession;
  const plan = {
    deployment: "d",
    recipe: { extra_mounts: [], engine: "vllm", model: "m/x", args: [], env: {} },
    nodes: names.map((node, rank) => ({ node, rank, host: node, image: "img", mounts: [{ host: mountDir, read_only: true }, { host: path.join(bin, "missing"), read_only: true }] })),
  } as unknown as Plan;
  const saved = process.env.PATH;
  process.env.PATH = `${bin}:${saved ?? ""}`;
  try {
    return { read: await readPlanNodes(plan, session, new AbortController().signal).all, calls };
  } finally {
    process.env.PATH = saved;
  }
}

test("readPlanNodes asks each node everything in one round trip, and reads each answer as the separate commands did", async () => {
  const { read, calls } = await readTwoNodes(false);
  assert.deepEqual(calls.sort(), ["n1", "n2"], "one exec per node");
  const n1 = read.nodes.get("n1");
  assert.ok(n1 !== undefined && !("problem" in n1));
  assert.equal(n1.imageId, "sha256:abc");
  assert.deepEqual(n1.containers.map((c) => [c.name, c.labels["launcher.deployment"], c.running]), [["launcher-other-r0", "other", true]]);
  assert.equal(n1.mounts.code, 3);
  assert.match(n1.mounts.stdout, /missing/);
  assert.deepEqual(read.weights, []);
});

test("readPlanNodes: a Docker that does not answer is said as before (Docker unreachable), with docker's own words", async () => {
  const { read } = await readTwoNodes(true);
  const n2 = read.nodes.get("n2");
  assert.ok(n2 !== undefined && "problem" in n2);
  assert.equal(n2.problem, "n2 (n2): Docker unreachable: Cannot connect to the Docker daemon");
});
