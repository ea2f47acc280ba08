import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { memorySource } from "../support/memory-source.js";
import { cliArgs } from "../built-cli.js";

const RECIPE = `name = "mine"\ndocker_image = "mine:local"\ndocker_image_dir = "mine"\nmodel = "org/m"\n`;
const source = memorySource({
  "recipes/mine/recipe.toml": RECIPE,
  "recipes/child/recipe.toml": `extends = "mine"\nname = "child"\n`,
});
const findings = (ref: string, names: string[] | undefined): string[] =>
  resolveRecipe(ref, source, names === undefined ? {} : { imageFolders: { roots: ["docker-images"], names } }).diagnostics.map(formatDiagnostic);

test("a docker_image_dir with no folder under docker-images/ is a warning at its line, saying how to provide one or that the image must be on the nodes", () => {
  const [only, ...rest] = findings("mine", ["practice-engine"]);
  assert.deepEqual(rest, []);
  assert.match(only ?? "", /^recipes\/mine\/recipe\.toml:3:20: warning: docker_image_dir "mine" names no folder with a Dockerfile under docker-images\/ \(looked in docker-images\)\n {2}hint: .*put its Dockerfile in docker-images\/mine\/.*otherwise the image mine:local must already be on the nodes/);
});

test("an inherited docker_image_dir is reported at the parent's line; a folder that exists, or no folder list, is no finding", () => {
  assert.match(findings("child", [])[0] ?? "", /^recipes\/mine\/recipe\.toml:3:20: warning: docker_image_dir "mine"/);
  assert.deepEqual(findings("mine", ["mine"]), []);
  // Pure callers that do not look at the file system (golden plans) are not warned.
  assert.deepEqual(findings("mine", undefined), []);
});

const dir = mkdtempSync(path.join(tmpdir(), "launcher-image-dir-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("launcher validate warns (exit 0) until docker-images/<dir>/ holds a Dockerfile", () => {
  mkdirSync(path.join(dir, "recipes", "mine"), { recursive: true });
  writeFileSync(path.join(dir, "recipes", "mine", "recipe.toml"), RECIPE);
  const run = () =>
    spawnSync(process.execPath, [...cliArgs(), "validate", "mine"], {
      cwd: dir,
      encoding: "utf8",
      env: { ...process.env, NODE_OPTIONS: "", LAUNCHER_DOCKER_IMAGES: "" },
    });
  const before = run();
  assert.equal(before.status, 0, before.stderr);
  assert.match(before.stderr, /recipes\/mine\/recipe\.toml:3:20: warning: docker_image_dir "mine" names no folder/);
  mkdirSync(path.join(dir, "docker-images", "mine"), { recursive: true });
  writeFileSync(path.join(dir, "docker-images", "mine", "Dockerfile"), "FROM scratch\n");
  const fixed = run();
  assert.equal(fixed.status, 0, fixed.stderr);
  assert.doesNotMatch(fixed.stderr, /warning|error/);
});

test("up's preflight, an image on no node: a public image (no docker_image_dir) is pulled on one node, since launcher never pulls; one of ours is built", async () => {
  const { missingImage } = await import("../../src/boot/preflight.js");
  const pub = { id: "qwen3-8b-1x", docker_image: "nvcr.io/nvidia/vllm:25.11-py3" };
  assert.equal(
    missingImage(pub, ["spark1"], true),
    "image nvcr.io/nvidia/vllm:25.11-py3 is missing on spark1: launcher does not pull images: run docker pull nvcr.io/nvidia/vllm:25.11-py3 on one node, then up sends it to the others (or launcher images push qwen3-8b-1x)",
  );
  assert.match(missingImage({ ...pub, docker_image_dir: "mine" }, ["spark1"], true), /: build it \(launcher images build qwen3-8b-1x, from docker-images\/mine\/\), then launcher images push qwen3-8b-1x$/);
  assert.match(missingImage(pub, ["spark2"], false), /missing on spark2: launcher images push qwen3-8b-1x sends it/);
});
