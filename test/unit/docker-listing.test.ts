import assert from "node:assert/strict";
import { test } from "node:test";
import { RemoteError } from "../../src/config/errors.js";
import { inspectJson, LIST_SCRIPT, readListing, type ContainerInfo } from "../../src/remote/docker.js";
import { FakeNode } from "../support/fake-node.js";

// The listing's reader is the one SshDocker and FakeNode share (LIST_SCRIPT's output, docker
// inspect's JSON): what a fake node prints is read exactly as a real node's answer.

const c: ContainerInfo = { id: "abc", name: "launcher-d-r0", labels: { "launcher.deployment": "d" }, state: "exited", running: false, exitCode: 137, startedAt: "2026-01-01T00:00:01Z", finishedAt: "2026-01-01T00:00:02Z", image: "sha256:1" };

test("docker inspect's JSON of containers reads back as the same containers", () => {
  const node = new FakeNode("n1");
  assert.deepEqual(readListing(node.transport, { code: 0, stdout: inspectJson([c]), stderr: "" }), [c]);
  assert.deepEqual(readListing(node.transport, { code: 0, stdout: "", stderr: "" }), []);
});

test("a listing whose docker ps failed is the node's RemoteError, not an empty node", () => {
  const node = new FakeNode("n1");
  assert.throws(() => readListing(node.transport, { code: 97, stdout: "", stderr: "Cannot connect to the Docker daemon" }), (e: unknown) => e instanceof RemoteError && e.node === "n1" && /docker ps failed \(exit 97\)/.test(e.message));
});

test("a fake node answers LIST_SCRIPT with its containers of the label and refuses a script it does not know, recording both", async () => {
  const node = new FakeNode("n1");
  node.add("launcher-d-r0", { "launcher.deployment": "d" });
  node.add("other", { app: "x" });
  const listed = async (label: string): Promise<string[]> => node.listing(await node.transport.exec(["sh", "-c", LIST_SCRIPT, "sh", label])).map((x) => x.name);
  assert.deepEqual(await listed("launcher.deployment"), ["launcher-d-r0"]);
  assert.deepEqual(await listed("launcher.deployment=e"), []);
  assert.deepEqual((await node.containers("app=x")).map((x) => x.name), ["other"]);
  const r = await node.transport.exec(["sh", "-c", "echo hi"]);
  assert.equal(r.code, 127);
  assert.deepEqual(node.calls.map((x) => (x.op === "exec" ? `exec ${String(x.args[0])}` : x.op)), ["exec LIST_SCRIPT", "exec LIST_SCRIPT", "containers", "exec sh,-c,echo hi"]);
});
