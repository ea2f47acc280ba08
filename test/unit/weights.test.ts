import assert from "node:assert/strict";
import { test } from "node:test";
import type { ClusterNode } from "../../src/cluster/cluster.js";
import { blobSha256, weightsLocation } from "../../src/plan/weights.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";

const node: ClusterNode = { name: "spark2", rank: 1, host: "spark2", user: "ai", home: "/home/ai", hca: [], gpus: 1 };
const seed = (name: string) => {
  const r = resolveRecipe(name, fileRecipeSource(["recipes"])).recipe;
  assert.ok(r);
  return r;
};

test("weights: the hub of the HF_HOME mount (the vision seed's NAS), else ~/.cache/huggingface of the node's user", () => {
  const vision = weightsLocation(seed("dsv4-flash-vision"), node);
  assert.equal(vision?.hub, "/mnt/nas/ai/huggingface/hub");
  assert.equal(vision?.offline, true);
  assert.match(vision?.repo ?? "", /^models--[^/]+--[^/]+$/);
  const dcp2 = weightsLocation(seed("dsv41-flash-4x-dcp2"), node);
  assert.equal(dcp2?.hub, "/home/ai/.cache/huggingface/hub");
  assert.equal(dcp2?.revision, undefined, "no pin: refs/main decides");
  const pinned = weightsLocation({ ...seed("dsv41-flash-4x-dcp2"), args: ["--revision", "86f746b3"] }, node);
  assert.equal(pinned?.revision, "86f746b3");
  assert.equal(weightsLocation(seed("dsv41-flash-4x-dcp2"), { ...node, home: undefined } as unknown as ClusterNode), undefined, "~ without a known home");
});

test("SHA-256 blob names are checkable; a git blob id is not", () => {
  const sha = "b4cc28da729ab6cc58b96e890e1a687f959a54468980c8b8d5b27e0b5acbd468";
  assert.equal(blobSha256(sha), sha);
  assert.equal(blobSha256("5d3e1c2f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d"), undefined, "a git blob id is not a SHA-256 of the content");
});
