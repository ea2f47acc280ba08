import assert from "node:assert/strict";
import { GUARD_STOPS_AT_READY } from "../../src/cli/up.js";
import { describe, test } from "node:test";
import { launcher, ok, onHost, practiceSuite } from "./practice-cluster.js";

// The memory fit before a boot, on a 2-host practice cluster (both hosts share this machine's
// /proc/meminfo, which each reads as its own). Which fits are refused is test/unit/up-decisions.test.ts's.
const HOSTS = 2;
practiceSuite(HOSTS, "launcher-fit-");

describe("the memory fit before any container starts", { concurrency: false }, () => {
  test("a deployment that fits boots; up --drop-caches says on each node whether it could, and prints the arithmetic node by node", async () => {
    try {
      const r = ok(await launcher(["up", "practice-2x", "--drop-caches"], 240_000), "up");
      const out = r.stdout + r.stderr;
      assert.match(out, /memory fit \(GiB\):/);
      for (const [i, node] of [[1, "n1"], [2, "n2"]] as const) {
        assert.match(out, new RegExp(`${node}: need \\d+\\.\\d GiB = engine budget \\d+\\.\\d \\(--gpu-memory-utilization 0\\.25 x total`));
        // The practice hosts' users are not root and have no sudo: up says so, and goes on.
        const root = onHost(i, ["id", "-u"]).trim() === "0";
        assert.match(out, root ? new RegExp(`${node}: page cache dropped \\(as root\\)`) : new RegExp(`warning: ${node}: page cache not dropped: the SSH user is not root`));
      }
      // Without a daemon the guard ends with up: it says so.
      assert.ok(r.stderr.includes(GUARD_STOPS_AT_READY("practice-2x")), r.stderr);
      // plan shows the same arithmetic from what up's probe and preflight read (no node touched).
      const plan = ok(await launcher(["plan", "practice-2x"]), "plan");
      for (const node of ["n1", "n2"]) assert.match(plan.stdout, new RegExp(`${node}: need \\d+\\.\\d GiB = engine budget .*weights 0\\.0 \\(0\\.0 on disk / TP 2 x PP 1\\)`));
      assert.match(plan.stdout, /\(memory as launcher doctor read it at \d{4}-/);
    } finally {
      await launcher(["down", "practice-2x", "--grace", "1"]);
    }
  });
});
