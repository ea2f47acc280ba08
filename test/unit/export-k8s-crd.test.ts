import assert from "node:assert/strict";
import { test } from "node:test";
import { parse, stringify } from "yaml";
import { UserError } from "../../src/config/errors.js";
import { crdCheck, lwsCrdOf } from "../../src/export/lws-crd.js";
import { handMadeCrd } from "./lws-reference.js";

// `--crd FILE`'s reading: the LWS CRD found in what kubectl or an LWS release gives, anything else
// a user error naming the file.

const userError = (message: RegExp, line?: number) => (e: unknown): boolean =>
  e instanceof UserError && message.test(e.message) && (line === undefined || e.diagnostics.some((d) => d.loc.file === "crd.yaml" && d.loc.line === line));

test("the CRD is found alone, in a release's stream of objects, and in kubectl's List", () => {
  const crd = handMadeCrd();
  const deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: lws-controller-manager\n";
  const list = stringify({ apiVersion: "v1", kind: "List", items: [parse(crd)] });
  for (const text of [crd, `${deployment}---\n${crd}`, list, JSON.stringify(parse(crd))]) {
    const found = lwsCrdOf(text, "crd.yaml");
    assert.equal(found.file, "crd.yaml");
    assert.equal((found.schema as { type?: string }).type, "object");
  }
});

test("not the LWS CRD, no v1, not YAML, a schema ajv cannot compile: user errors naming the file", () => {
  const other = handMadeCrd().replace("name: leaderworkersets.leaderworkerset.x-k8s.io", "name: jobsets.jobset.x-k8s.io");
  assert.throws(() => lwsCrdOf(other, "crd.yaml"), userError(/^--crd crd.yaml holds no CustomResourceDefinition leaderworkersets\.leaderworkerset\.x-k8s\.io \(it holds CustomResourceDefinition jobsets\.jobset\.x-k8s\.io\)$/));
  assert.throws(() => lwsCrdOf("", "crd.yaml"), userError(/holds no CustomResourceDefinition .* \(it holds no Kubernetes object\)/));
  const many = Array.from({ length: 7 }, (_, i) => `kind: ConfigMap\nmetadata:\n  name: c${i}\n`).join("---\n");
  assert.throws(() => lwsCrdOf(many, "crd.yaml"), userError(/\(it holds ConfigMap c0, ConfigMap c1, ConfigMap c2, ConfigMap c3, ConfigMap c4 and 2 more\)$/));
  assert.throws(() => lwsCrdOf(handMadeCrd().replace("- name: v1\n", "- name: v1beta1\n"), "crd.yaml"), userError(/^--crd crd.yaml: its LeaderWorkerSet CRD has no version v1 with an openAPIV3Schema \(versions: v1beta1\)$/));
  assert.throws(() => lwsCrdOf("kind: [unclosed\n  x: 1\n", "crd.yaml"), userError(/^--crd crd.yaml is not YAML: /, 1));
  const badSchema = handMadeCrd().replace("type: object\n          properties:", "type: 5\n          properties:");
  assert.notEqual(badSchema, handMadeCrd());
  assert.throws(() => crdCheck(lwsCrdOf(badSchema, "crd.yaml")), userError(/^--crd crd.yaml: its v1 openAPIV3Schema is not a schema launcher can check against/));
});

test("the CRD's check holds a LeaderWorkerSet to its schema, strictly (kubectl's --validate=strict)", () => {
  const check = crdCheck(lwsCrdOf(handMadeCrd(["subGroupPolicy"]), "crd.yaml"));
  const lws = { apiVersion: "leaderworkerset.x-k8s.io/v1", kind: "LeaderWorkerSet", metadata: { name: "x" }, spec: { leaderWorkerTemplate: { size: 2, workerTemplate: { any: 1 }, subGroupPolicy: {} } } };
  assert.deepEqual(check(lws), []);
  assert.deepEqual(check({ ...lws, spec: { leaderWorkerTemplate: { size: 2, workerTemplate: {} } } }), ["/spec/leaderWorkerTemplate: must have required property 'subGroupPolicy'"]);
  assert.deepEqual(check({ ...lws, spec: { ...lws.spec, startupPolicy: "Soon" } }), ["/spec/startupPolicy: must be equal to one of the allowed values (LeaderCreated, LeaderReady)"]);
  assert.deepEqual(check({ ...lws, spec: { ...lws.spec, replica: 1 } }), ["/spec: must NOT have additional properties: replica"]);
});
