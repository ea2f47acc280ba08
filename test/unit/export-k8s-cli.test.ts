import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { parseAllDocuments } from "yaml";
import { escapeRegExp } from "../../src/config/reg-exp.js";
import { expand } from "../../src/export/expansion.js";
import { CRD_MAX_BYTES } from "../../src/export/lws-crd.js";
import { handMadeCrd, NO_REFERENCE, REFERENCE_CRD } from "./lws-reference.js";
import { LOADED_HOOK, loadedPackages } from "./loaded-packages.js";
import { cliArgs, sourceArgs } from "../built-cli.js";

const run = (args: string[], hook = false, input?: string) => {
  const r = spawnSync(process.execPath, [...(hook ? ["--import", LOADED_HOOK, ...sourceArgs()] : cliArgs()), ...args], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "", NODE_NO_WARNINGS: "0" }, ...(input === undefined ? {} : { input }) });
  // A bundled package that calls a deprecated Node API warns as it never did from node_modules (DEP0040: punycode).
  assert.doesNotMatch(r.stderr, /DeprecationWarning/);
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};
const dir = mkdtempSync(path.join(tmpdir(), "launcher-export-k8s-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const SEED_4X = ["dsv41-flash-4x-dcp2", "-c", "examples/clusters/spark-4x.toml"];
const IMAGE = ["--image", "registry.example/dsv41-flash-dcp2:1", "--home", "/home/ai"];

test("export k8s: a launcher-built image without --image is a user error that says what to do, no stack", () => {
  const r = run(["export", "k8s", ...SEED_4X]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /launcher: recipe dsv41-flash-4x-dcp2: its image dsv41-flash-dcp2:local is built by launcher/);
  assert.match(r.stderr, /hint: push it to a registry .* --image REGISTRY\/dsv41-flash-dcp2:local/);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
});

test("export k8s -o FILE: the YAML (a LeaderWorkerSet, then a Service) in the file, a line on stderr", () => {
  const file = path.join(dir, "lws.yaml");
  const r = run(["export", "k8s", ...SEED_4X, ...IMAGE, "--namespace", "llm", "--lane", "deepseek", "-o", file]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, "");
  assert.match(r.stderr, new RegExp(`launcher: wrote ${escapeRegExp(file)}: LeaderWorkerSet dsv41-flash-4x-dcp2 \\(4 pods\\) and Service deepseek; kubectl apply -f`));
  const docs = parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS() as { kind: string; metadata: { name: string; namespace?: string } });
  assert.deepEqual(docs.map((d) => [d.kind, d.metadata.name, d.metadata.namespace]), [["LeaderWorkerSet", "dsv41-flash-4x-dcp2", "llm"], ["Service", "deepseek", "llm"]]);
});

test("export k8s --json: every rank's command, with LWS's variables put in, is plan --json's argv for that rank", () => {
  const exp = run(["export", "k8s", ...SEED_4X, ...IMAGE, "--json"]);
  assert.equal(exp.code, 0, exp.stderr);
  const plan = run(["plan", ...SEED_4X, "--json"]);
  assert.equal(plan.code, 0, plan.stderr);
  type Container = { command: string[]; args: string[] };
  const lws = (JSON.parse(exp.stdout) as { lws: { spec: { leaderWorkerTemplate: Record<string, { spec: { containers: Container[] } }> } } }).lws;
  const planned = JSON.parse(plan.stdout) as { master_addr: string; nodes: { rank: number; argv: string[] }[] };
  for (const node of planned.nodes) {
    const c = lws.spec.leaderWorkerTemplate[node.rank === 0 ? "leaderTemplate" : "workerTemplate"]?.spec.containers[0];
    assert.ok(c);
    const bind = node.argv[node.argv.indexOf("--host") + 1] ?? "";
    const vars = { LWS_LEADER_ADDRESS: planned.master_addr, LWS_WORKER_INDEX: String(node.rank), LWS_GROUP_SIZE: "4", LAUNCHER_POD_IP: bind };
    // sh -c SCRIPT launcher-fabric, then the process: the image's entrypoint (vllm serve) and the words after the image.
    const argv = [...c.command, ...c.args].map((w) => expand(w, vars)).slice(4);
    assert.deepEqual(argv, ["vllm", "serve", ...node.argv.slice(node.argv.indexOf("--") + 2)], `rank ${node.rank}`);
  }
});

test("export: help lists k8s beside systemd; export systemd loads none of k8s's packages", () => {
  const help = run(["export", "--help"]);
  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stdout, /systemd[\s\S]*k8s/);
  const r = run(["export", "systemd", "--cluster", "examples/clusters/spark-2x.toml"], true);
  assert.equal(r.code, 0, r.stderr);
  const loaded = loadedPackages(r.stderr);
  assert.ok(loaded.includes("commander"), loaded.join(" "));
  assert.deepEqual(loaded.filter((p) => ["ajv", "kubernetes-models", "@kubernetes-models/base", "yaml"].includes(p)), []);
});


test("export k8s --crd: the published LWS CRD, given as the cluster has it, takes the export", { skip: NO_REFERENCE }, () => {
  const r = run(["export", "k8s", ...SEED_4X, ...IMAGE, "--crd", REFERENCE_CRD]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^kind: LeaderWorkerSet$/m);
});

test("export k8s --crd: a CRD whose schema demands a field the export lacks fails loudly (exit 70), naming the field and the file, and writes nothing", () => {
  const crd = path.join(dir, "demanding-crd.yaml");
  writeFileSync(crd, handMadeCrd(["subGroupPolicy"]));
  const out = path.join(dir, "never.yaml");
  const r = run(["export", "k8s", ...SEED_4X, ...IMAGE, "--crd", crd, "-o", out]);
  assert.equal(r.code, 70, r.stderr);
  assert.match(r.stderr, new RegExp(`- LeaderWorkerSet /spec/leaderWorkerTemplate: must have required property 'subGroupPolicy' \\(the CRD in ${escapeRegExp(crd)}\\)`));
  assert.equal(existsSync(out), false);
});

test("export k8s --crd -: the CRD read from standard input, as kubectl get crd pipes it", () => {
  const r = run(["export", "k8s", ...SEED_4X, ...IMAGE, "--crd", "-"], false, handMadeCrd());
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^kind: LeaderWorkerSet$/m);
});

test("export k8s --crd: a file that is not the LWS CRD, has no v1, or is too large is a user error naming it, no stack", () => {
  const notCrd = path.join(dir, "deployment.yaml");
  writeFileSync(notCrd, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: lws-controller-manager\n");
  const noV1 = path.join(dir, "v1alpha1.yaml");
  writeFileSync(noV1, handMadeCrd().replace("name: v1\n", "name: v1alpha1\n"));
  const huge = path.join(dir, "huge.yaml");
  writeFileSync(huge, "");
  truncateSync(huge, CRD_MAX_BYTES + 1);
  const cases: [string, RegExp][] = [
    [notCrd, new RegExp(`launcher: --crd ${escapeRegExp(notCrd)} holds no CustomResourceDefinition leaderworkersets.leaderworkerset.x-k8s.io \\(it holds Deployment lws-controller-manager\\)`)],
    [noV1, new RegExp(`launcher: --crd ${escapeRegExp(noV1)}: its LeaderWorkerSet CRD has no version v1 with an openAPIV3Schema \\(versions: v1alpha1\\)`)],
    [huge, new RegExp(`launcher: LeaderWorkerSet CRD ${escapeRegExp(huge)} is larger than ${CRD_MAX_BYTES} bytes`)],
    [path.join(dir, "absent.yaml"), /launcher: LeaderWorkerSet CRD \S+absent.yaml not found/],
  ];
  for (const [file, said] of cases) {
    const r = run(["export", "k8s", ...SEED_4X, ...IMAGE, "--crd", file]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, said);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
    assert.equal(r.stdout, "");
  }
});
