import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { planDeployment, type Plan } from "../../src/plan/plan.js";
import { planJson, planText, unknownNode } from "../../src/plan/render.js";
import { cliArgs } from "../built-cli.js";

const planOf = (recipe: string, clusterFile: string): Plan => {
  const cluster = parseCluster(clusterFile, readFileSync(clusterFile, "utf8")).cluster;
  const r = resolveRecipe(recipe, fileRecipeSource(["recipes"]));
  assert.ok(cluster && r.recipe);
  const p = planDeployment(r.recipe, cluster);
  assert.ok(p.ok);
  return p.plan;
};
const SPARK4 = "examples/clusters/spark-4x.toml";
/** The node each `# rank` block of the text is for, in the order printed. */
const printed = (text: string): string[] => [...text.matchAll(/^# rank \d+ \(\w+\) on (\S+) /gm)].map((m) => m[1] ?? "");

test("plan text lists the nodes in start order: mp at once, in rank order", () => {
  const plan = planOf("dsv41-flash-4x-dcp2", SPARK4);
  assert.deepEqual(plan.start_order, ["spark1", "spark2", "spark3", "spark4"]);
  assert.deepEqual(printed(planText(plan)), plan.start_order);
  assert.match(planText(plan), /^ {2}start {5}spark1, spark2, spark3, spark4 \(at once\)$/m);
});

test("plan --node: the text and the JSON show only that node, the summary unchanged", () => {
  const plan = planOf("dsv41-flash-4x-dcp2", SPARK4);
  const text = planText(plan, { node: "spark3" });
  assert.deepEqual(printed(text), ["spark3"]);
  assert.match(text, /^ {2}start {5}spark1, spark2, spark3, spark4 \(at once\)$/m);
  const json = planJson(plan, { node: "spark3" }) as { nodes: { node: string; rank: number }[]; start_order: string[] };
  assert.deepEqual(json.nodes.map((n) => [n.node, n.rank]), [["spark3", 2]]);
  assert.equal(json.start_order.length, 4);
  // Without a filter, JSON keeps every node in rank order (scripts index nodes[0] as the head).
  assert.deepEqual((planJson(plan) as { nodes: { rank: number }[] }).nodes.map((n) => n.rank), [0, 1, 2, 3]);
});

test("plan --node: a node the plan does not run on is named with the ones it does", () => {
  const plan = planOf("dsv4-flash-vision", SPARK4);
  assert.deepEqual(unknownNode(plan, { node: "spark3" }), ["spark1", "spark2"]);
  assert.equal(unknownNode(plan, { node: "spark1" }), undefined);
  assert.equal(unknownNode(plan, {}), undefined);
});

const state = mkdtempSync(path.join(tmpdir(), "launcher-plan-view-"));
after(() => rmSync(state, { recursive: true, force: true }));
const run = (args: string[]) => {
  const r = spawnSync(process.execPath, [...cliArgs(), ...args], {
    encoding: "utf8",
    // A store of its own: the test reads no detected fabric values left by another run.
    env: { ...process.env, NODE_OPTIONS: "", XDG_STATE_HOME: state },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};

test("launcher plan --node NAME prints that node; an unknown one is a user error naming --node and the plan's nodes", () => {
  const one = run(["plan", "dsv41-flash-4x-dcp2", "--cluster", SPARK4, "--node", "spark4"]);
  assert.equal(one.code, 0, one.stderr);
  assert.deepEqual(printed(one.stdout), ["spark4"]);
  const bad = run(["plan", "dsv4-flash-vision", "--cluster", SPARK4, "--node", "spark3"]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /--node spark3: dsv4-flash-vision does not run on that node \(it runs on spark1, spark2\)\n {2}hint: did you mean --node spark1\?/);
});
