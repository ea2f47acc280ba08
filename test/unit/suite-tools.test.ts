import assert from "node:assert/strict";
import { test } from "node:test";
import { readTimes, slowestFiles } from "../file-times.js";
import { parseHostState, whyNotReuse, type HostState, type MadeRig } from "../integration/practice-cluster.js";

// The suite's own tools: the shared practice cluster's reuse decision and the slowest-files table.

const clean: HostState = { image: "sha256:aa", containers: 0, home: "h1" };
const made: MadeRig = { hosts: 4, states: [clean, clean, clean, clean], paths: [[], [], [], []] };

test("a host's state: image, containers and home digest; the home's paths only when listed", () => {
  assert.deepEqual(parseHostState("image sha256:aa\ncontainers 0\nhome h1\n"), { state: clean, paths: [] });
  assert.deepEqual(parseHostState("image none\ncontainers 2\nhome h2\npaths\n.ssh\n.ssh/authorized_keys\n"), {
    state: { image: "none", containers: 2, home: "h2" },
    paths: [".ssh", ".ssh/authorized_keys"],
  });
  assert.equal(parseHostState("image sha256:aa\nhome h1\n"), undefined, "a line missing: no state");
  assert.equal(parseHostState(""), undefined);
});

test("the shared rig is reused only when it has the hosts and each is as it was made, its links too", () => {
  const now = [clean, clean, clean, clean];
  assert.equal(whyNotReuse(made, 2, now, []), undefined);
  assert.equal(whyNotReuse(made, 4, now, []), undefined);
  assert.match(whyNotReuse(undefined, 2, now, []) ?? "", /none made/);
  assert.match(whyNotReuse({ ...made, hosts: 2 }, 3, now, []) ?? "", /2 hosts, not 3/);
  assert.match(whyNotReuse(made, 2, now, ["lnchm3 is slowed"]) ?? "", /lnchm3 is slowed/);
  // A host past the file's own still counts: the next file may want it.
  assert.match(whyNotReuse(made, 2, [clean, clean, clean, undefined], []) ?? "", /n4 did not answer/);
  assert.match(whyNotReuse(made, 2, [clean, { ...clean, image: "none" }, clean, clean], []) ?? "", /n2's practice image is none/);
  assert.match(whyNotReuse(made, 2, [{ ...clean, containers: 1 }, clean, clean, clean], []) ?? "", /n1 still has 1 containers/);
  assert.match(whyNotReuse(made, 2, [clean, clean, { ...clean, home: "h9" }, clean], []) ?? "", /n3's home differs/);
});

test("slowest files: slowest first, at most the number asked, paths relative, with the sum and the run", () => {
  const files = new Map([["/w/test/a.test.ts", 1500], ["/w/test/b.test.ts", 30_000], ["/w/test/c.test.ts", 200]]);
  assert.deepEqual(slowestFiles(files, 31_000, 2, "/w"), [
    "slowest 2 of 3 test files:",
    "    30.0 s  test/b.test.ts",
    "     1.5 s  test/a.test.ts",
    "  files' own times add up to 31.7 s; the run took 31.0 s",
  ]);
});

test("the times log of several runs: a file's times add up; a line that is not MS<tab>FILE is passed over", () => {
  assert.deepEqual(readTimes("1500\t/w/a.test.ts\n200\t/w/b.test.ts\n100\t/w/a.test.ts\nnoise\n\tx\n"), new Map([["/w/a.test.ts", 1600], ["/w/b.test.ts", 200]]));
});
