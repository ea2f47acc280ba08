import { test, after, mock } from "node:test";
import { spawn } from "node:child_process";
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { setImmediate as tick } from "node:timers/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { imageUnsettled, READ_SCRIPT, readPlanNodes, readSections, type NodeReading, type PlanReadings } from "../../src/boot/preflight.js";
import { ReadyRetry, readyRetryMs } from "../../src/boot/readiness.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import type { Plan } from "../../src/plan/plan.js";
import { SshDocker, LIST_SCRIPT } from "../../src/remote/docker.js";
import { localTransport } from "../../src/remote/local.js";
import type { Transport } from "../../src/remote/transport.js";

const NONCE = "0123456789abcdef0123456789abcdef";

test("readSections: each part's exit status, stdout exactly (trailing newlines included) and stderr", () => {
  const out = [`${NONCE} meminfo`, "MemTotal: 1 kB", "", `${NONCE} err 0`, "", `${NONCE} image`, "", `${NONCE} err 1`, "Error: No such image: x", ""].join("\n");
  const parts = readSections(out, NONCE);
  assert.deepEqual(parts.get("meminfo"), { code: 0, stdout: "MemTotal: 1 kB\n", stderr: "" });
  assert.deepEqual(parts.get("image"), { code: 1, stdout: "", stderr: "Error: No such image: x" });
});

test("readSections: a node's output cannot forge a part without the nonce; a part cut short is absent", () => {
  // A container label (untrusted) that prints marker-like lines with another nonce, and the nonce's own
  // marker words where they are no marker (a header needs a name and a number).
  const forged = ["ffff containers", "ffff err 0", `${NONCE} err`, `${NONCE} nopart`, `${NONCE} x y z`].join("\n");
  const out = [`${NONCE} containers`, forged, `${NONCE} err 0`, "", `${NONCE} meminfo`, "MemTotal: 1 kB"].join("\n");
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
// down: the daemon does not answer, so every docker command fails as the CLI does then;
// garbled: `docker inspect` prints what is no listing.
function fakeDocker(mode: "up" | "down" | "garbled"): void {
  writeFileSync(
    path.join(bin, "docker"),
    `#!/bin/sh
${mode === "down" ? 'echo "Cannot connect to the Docker daemon" >&2; exit 1' : ""}
case "$1" in
  image) echo sha256:abc ;;
  ps) echo id1 ;;
  inspect) ${mode === "garbled" ? "echo '[{\"Id\": '" : `cat <<'EOF'
${inspect}
EOF`}
  ;;
esac
`,
  );
  chmodSync(path.join(bin, "docker"), 0o755);
}

function counted(t: Transport, calls: string[]): Transport {
  return { ...t, exec: (argv, o) => (calls.push(t.node), t.exec(argv, o)) };
}

async function readTwoNodes(mode: "up" | "down" | "garbled", wrap: (t: Transport) => Transport = (t) => t): Promise<{ read: PlanReadings; calls: string[] }> {
  fakeDocker(mode);
  const mountDir = mkdtempSync(path.join(bin, "m-"));
  const calls: string[] = [];
  const names = ["n1", "n2"];
  const session = {
    cluster: { nodes: names.map((name) => ({ name, host: name })) },
    docker: new Map(names.map((n) => [n, new SshDocker(counted(wrap(localTransport(n)), calls))])),
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
  const { read, calls } = await readTwoNodes("up");
  assert.deepEqual(calls.sort(), ["n1", "n2"], "one exec per node");
  const n1 = read.nodes.get("n1");
  assert.ok(n1 !== undefined && !("problem" in n1));
  assert.equal(n1.imageId, "sha256:abc");
  assert.deepEqual(n1.containers.map((c) => [c.name, c.labels["launcher.deployment"], c.running]), [["launcher-other-r0", "other", true]]);
  assert.equal(n1.mounts.code, 3);
  assert.match(n1.mounts.stdout, /missing/);
  assert.deepEqual(read.weights, []);
});

test("readPlanNodes: a Docker that does not answer is that node's problem (Docker unreachable), with docker's own words", async () => {
  const { read } = await readTwoNodes("down");
  const n2 = read.nodes.get("n2");
  assert.ok(n2 !== undefined && "problem" in n2);
  assert.equal(n2.problem, "n2 (n2): Docker unreachable: Cannot connect to the Docker daemon");
});

test("readPlanNodes: a listing that is no JSON, or an answer cut short, is that node's problem, named, not a rejection", async () => {
  const garbled = (await readTwoNodes("garbled")).read.nodes.get("n1");
  assert.ok(garbled !== undefined && "problem" in garbled);
  assert.equal(garbled.problem, "n1 (n1): its container listing (docker inspect) could not be read as JSON");
  // A node whose shell ended before printing its parts (here: exit 98 and a word on stderr).
  const cut = (t: Transport): Transport => ({ ...t, exec: async () => ({ code: 98, stdout: "", stderr: "sh: 1: cannot fork" }) });
  const short = (await readTwoNodes("up", cut)).read.nodes.get("n2");
  assert.ok(short !== undefined && "problem" in short);
  assert.equal(short.problem, "n2 (n2): the preflight's reads ended without containers, image, mounts, meminfo (exit 98): sh: 1: cannot fork");
});

test("READ_SCRIPT under dash: a reader that hangs up early leaves no file holding the container listing", async () => {
  const secret = "VLLM_API_KEY=sk-secret-0123456789";
  const scratch = mkdtempSync(path.join(bin, "killed-"));
  const fake = mkdtempSync(path.join(bin, "fake-"));
  // The listing is larger than a pipe holds, so the script is still writing when the reader goes.
  const listing = JSON.stringify([{ Id: "id1", Name: "/x", Config: { Env: [secret], Labels: {} }, State: {}, Pad: "p".repeat(256 * 1024) }]);
  writeFileSync(path.join(fake, "listing.json"), listing);
  writeFileSync(path.join(fake, "docker"), `#!/bin/sh\ncase "$1" in ps) echo id1 ;; inspect) cat ${path.join(fake, "listing.json")} ;; image) echo sha256:abc ;; esac\n`);
  chmodSync(path.join(fake, "docker"), 0o755);
  const child = spawn("dash", ["-c", READ_SCRIPT, "sh", NONCE, "img", "launcher.deployment", LIST_SCRIPT, "exit 0"], {
    cwd: scratch,
    env: { ...process.env, PATH: `${fake}:${process.env.PATH ?? ""}`, TMPDIR: scratch },
    stdio: ["ignore", "pipe", "ignore"],
  });
  const exited = new Promise<void>((resolve) => child.on("close", () => resolve()));
  child.stdout.once("data", () => child.stdout.destroy());
  // Bounded: a script that never ends fails the test here rather than hanging it.
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
  const holding = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) return holding(full);
      return readFileSync(full, "utf8").includes(secret) ? [full] : [];
    });
  assert.deepEqual(holding(scratch), []);
});

test("ReadyRetry: the head's ready line ends a wait once; the lines after it (still ready) do not", async () => {
  mock.timers.enable({ apis: ["setTimeout"] });
  try {
    const retry = new ReadyRetry();
    const never = new Promise<void>(() => undefined);
    let ended = 0;
    retry.headState(false);
    const first = retry.wait(5, never).then(() => ended++);
    retry.headState(false);
    await tick();
    assert.equal(ended, 0, "a line before ready does not wake it");
    retry.headState(true);
    await first;
    assert.equal(ended, 1, "the ready line woke it before its timer");
    const second = retry.wait(5, never).then(() => ended++);
    for (let i = 0; i < 20; i++) retry.headState(true);
    await tick();
    assert.equal(ended, 1, "access lines after ready leave the wait to its timer");
    mock.timers.tick(readyRetryMs(5));
    await second;
    assert.equal(ended, 2);
  } finally {
    mock.timers.reset();
  }
});
