import assert from "node:assert/strict";
import { test } from "node:test";
import { rankDeathOf } from "../../src/supervise/deaths.js";
import { decodeDockerEvent } from "../../src/remote/docker.js";

// A rank's death as the node's Docker reports it (`docker events --format '{{json .}}'`).

/** A `die` line as dockerd 20.10 prints it (moby api/types/events Message: Actor.Attributes holds the labels, the name and exitCode). */
const dieLine = (attributes: Record<string, string>): string =>
  JSON.stringify({ status: "die", id: "c0ffee", from: "img", Type: "container", Action: "die", Actor: { ID: "c0ffee", Attributes: { image: "img", ...attributes } }, scope: "local", time: 1764748800, timeNano: 1764748800123456789 });

test("docker events: a rank's die event names its deployment, rank, node, container and exit status", () => {
  const e = decodeDockerEvent(dieLine({ "launcher.deployment": "chat", "launcher.rank": "1", name: "launcher-chat-r1", exitCode: "137" }));
  assert.ok(e !== undefined);
  assert.deepEqual(rankDeathOf(e, "n2"), {
    deployment: "chat",
    node: "n2",
    failure: { kind: "rank-exited", rank: 1, node: "n2", container: "launcher-chat-r1", message: "rank 1 on n2 exited (exit 137)" },
  });
});

test("docker events: another action, a container without launcher's labels, or a line that is no event is no death", () => {
  const start = decodeDockerEvent(dieLine({ "launcher.deployment": "chat", "launcher.rank": "0", name: "x" }).replace(/"die"/g, '"start"'));
  assert.ok(start !== undefined);
  assert.equal(rankDeathOf(start, "n1"), undefined);
  const foreign = decodeDockerEvent(dieLine({ name: "postgres", exitCode: "0" }));
  assert.ok(foreign !== undefined);
  assert.equal(rankDeathOf(foreign, "n1"), undefined);
  const badRank = decodeDockerEvent(dieLine({ "launcher.deployment": "chat", "launcher.rank": "x", name: "y" }));
  assert.ok(badRank !== undefined);
  assert.equal(rankDeathOf(badRank, "n1"), undefined);
  assert.equal(decodeDockerEvent("ssh: connect to host n1 port 22: Connection refused"), undefined);
  assert.equal(decodeDockerEvent(`{"Type":"container"}`), undefined);
});
