import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import { formatDiagnostic } from "../../src/config/diagnostic.js";

const errorsOf = (text: string): string[] => parseCluster("c.toml", text).diagnostics.map(formatDiagnostic);

test("the example clusters parse, with per-node fabric values and homes", () => {
  for (const f of ["examples/clusters/spark-4x.toml", "examples/clusters/spark-2x.toml"]) {
    const r = parseCluster(f, readFileSync(f, "utf8"));
    assert.deepEqual(r.diagnostics, [], f);
  }
  const four = parseCluster("x.toml", readFileSync("examples/clusters/spark-4x.toml", "utf8")).cluster;
  assert.equal(four?.nodes.length, 4);
  assert.deepEqual(four?.nodes.map((n) => n.gid_index), [3, 3, 4, 3]);
  assert.deepEqual(four?.nodes.map((n) => n.home), ["/home/ai", "/home/ai", "/home/ai", "/root"]);
  assert.ok(four?.run_args.includes("--gpus"));
});

test("defaults suit DGX Sparks and [docker] run_args replaces them", () => {
  const base = `[[nodes]]\nname = "n1"\nhost = "h1"\n`;
  const c = parseCluster("c.toml", base).cluster;
  assert.deepEqual(c?.run_args, ["--gpus", "all", "--network", "host", "--device", "/dev/infiniband", "--ulimit", "memlock=-1", "--ulimit", "nofile=1048576:1048576"]);
  assert.equal(c?.api_port, 8000);
  assert.equal(c?.master_port, 29501);
  assert.equal(c?.nodes[0]?.home, undefined);
  const custom = parseCluster("c.toml", `[docker]\nrun_args = ["--network", "host"]\n${base}`).cluster;
  assert.deepEqual(custom?.run_args, ["--network", "host"]);
});

test("an unknown node key suggests the right one, at its line", () => {
  const errors = errorsOf(`[[nodes]]\nname = "n1"\nhost = "h1"\nfabric_ifname = "eth1"\n`);
  assert.deepEqual(errors, ['c.toml:4:1: error: unknown key "fabric_ifname" in nodes[0]\n  hint: did you mean "fabric_iface"?']);
});

test("wrong types, bad addresses and duplicate nodes are errors naming the node", () => {
  const errors = errorsOf(
    `[[nodes]]\nname = "n1"\nhost = "h1"\nfabric_ip = "10.0.0.300"\ngid_index = "3"\n[[nodes]]\nname = "n1"\nhost = "h2"\n`,
  );
  assert.match(errors.join("\n"), /c\.toml:5:13: error: nodes\[0\]\.gid_index must be a number, not a string/);
  const second = errorsOf(`[[nodes]]\nname = "n1"\nhost = "h1"\nfabric_ip = "10.0.0.300"\n[[nodes]]\nname = "n1"\nhost = "h2"\n`);
  assert.match(second.join("\n"), /c\.toml:4:13: error: nodes\[0\]\.fabric_ip "10\.0\.0\.300" is not an IP address/);
  assert.match(second.join("\n"), /c\.toml:6:8: error: nodes\[1\]\.name "n1" is also nodes\[0\]\.name/);
});

test("a cluster without nodes is an error", () => {
  assert.match(errorsOf(`name = "x"\n`).join("\n"), /missing required key "nodes"/);
});
