import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DEPLOYMENT_STATUSES } from "../../src/contract/deployment.js";
import { launcher, ok, practiceSuite, variant } from "./practice-cluster.js";

// What the CLI's hand-fitting flags do on real SSH and Docker: `logs` hands --since to each node's
// `docker logs` (its clock, moby/moby man/src/container/logs.md) and -t shows docker's timestamps;
// `ps -o json` is one object with its warnings; `down` takes a duration.
const dir = practiceSuite(1, "launcher-cli-hand-");
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z \[n1\] /;

describe("the CLI's short flags and durations on the practice cluster", { concurrency: false }, () => {
  test("logs -t -n --since, ps -o json, down --grace 2s", async () => {
    const one = variant(dir, "hand-one", "practice-2x", "required_nodes = 1\ntensor_parallel_size = 1\n");
    ok(await launcher(["up", one, "--json"], 120_000), "up");

    const ps = JSON.parse(ok(await launcher(["ps", "-o", "json"]), "ps").stdout) as { deployments: { deployment: string; status: string }[]; warnings: string[] };
    assert.deepEqual(ps.deployments.map((d) => d.deployment), ["hand-one"]);
    assert.equal(ps.deployments[0]?.status, DEPLOYMENT_STATUSES[0], "serving");
    assert.deepEqual(ps.warnings, []);

    const stamped = ok(await launcher(["logs", "hand-one", "-t", "-n", "3"]), "logs -t -n 3").stdout.trimEnd().split("\n");
    assert.equal(stamped.length, 3, stamped.join("\n"));
    for (const line of stamped) assert.match(line, TIME);
    const recent = ok(await launcher(["logs", "hand-one", "--since", "1h", "-n", "2"]), "logs --since 1h").stdout.trimEnd().split("\n");
    assert.equal(recent.length, 2, recent.join("\n"));
    assert.doesNotMatch(recent[0] ?? "", TIME, "no times without -t");
    // Nothing was logged after a time an hour ahead: docker applied --since.
    const future = new Date(Date.now() + 3_600_000).toISOString().replace(/\.\d+Z$/, "Z");
    assert.equal(ok(await launcher(["logs", "hand-one", "--since", future]), "logs --since TIME").stdout, "");

    const down = JSON.parse(ok(await launcher(["down", "hand-one", "--grace", "2s", "--json"]), "down").stdout) as { complete: boolean; removed: unknown[] };
    assert.equal(down.complete, true);
    assert.equal(down.removed.length, 1);
  });
});
