import assert from "node:assert/strict";
import { test } from "node:test";
import { readFileSync } from "node:fs";
import type { EngineFlags } from "../../src/engine/adapter.js";
import { DUMP_SENTINEL } from "../../src/engine/argparse-dump.js";
import { parseCluster } from "../../src/cluster/parse.js";
import type { ImageFacts } from "../../src/engine/image-contract.js";
import { MULTINODE_MIN_VERSION, olderThan, vllmImage } from "../../src/engine/vllm/image.js";
import { checkImage, type ImageFactsCache } from "../../src/nodes/image-check.js";
import { planDeployment, type Plan } from "../../src/plan/plan.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";
import { SshDocker, type Docker } from "../../src/remote/docker.js";
import type { ExecResult, Transport } from "../../src/remote/transport.js";
import { Store } from "../../src/store/store.js";

const IMAGE = "vllm/vllm-openai:v0.12.0";
const SERVE = { entrypoint: ["vllm", "serve"], version: "0.12.0" } satisfies ImageFacts;

test("the version `vllm --version` prints (vllm/entrypoints/cli/main.py: argparse's version action), after any log lines", () => {
  assert.equal(vllmImage.parseVersion("INFO 05-19 12:34:56 [__init__.py:216] Automatically detected platform cuda.\n0.12.0\n"), "0.12.0");
  assert.equal(vllmImage.parseVersion("0.11.1rc2.dev45+g1a2b3c4\n"), "0.11.1rc2.dev45+g1a2b3c4");
  assert.equal(vllmImage.parseVersion("v20.11.1\n"), null, "node's --version is no vLLM version");
  assert.equal(vllmImage.parseVersion("usage: vllm [-h]\nvllm: error: unrecognized arguments\n"), null);
});

test("older than multi-node support: by release numbers, its release candidates included; nightlies of the release and untagged source builds are not", () => {
  assert.equal(MULTINODE_MIN_VERSION, "0.11.1");
  // The 0.11.1 release candidates were cut before --nnodes (issue 28): PEP 440 puts rcN before the release.
  for (const v of ["0.10.2", "0.11.0", "0.9.2.post1", "0.11.0rc3", "0.11.1rc0", "0.11.1rc7", "0.11.1a1", "0.11.1b2"]) assert.equal(olderThan(v, MULTINODE_MIN_VERSION), true, v);
  for (const v of ["0.11.1", "0.11.1.post1", "0.11.2rc1", "0.11.1.dev12+gabc", "0.12.0", "1.0", "0.1.dev1+gdeadbee"]) assert.equal(olderThan(v, MULTINODE_MIN_VERSION), false, v);
});

test("the image contract: vllm serve as ENTRYPOINT unless the recipe sets one; --nnodes support on mp; each problem names image and version", () => {
  assert.deepEqual(vllmImage.problems(IMAGE, SERVE, { backend: "mp" }), []);
  assert.deepEqual(vllmImage.problems(IMAGE, { ...SERVE, entrypoint: ["/usr/local/bin/vllm", "serve"] }, { backend: "mp" }), []);
  const old = { entrypoint: ["python3", "-m", "vllm.entrypoints.openai.api_server"], version: "0.10.1" };
  const both = vllmImage.problems("vllm/vllm-openai:v0.10.1", old, { backend: "mp" });
  assert.equal(both.length, 2);
  assert.match(both[0] ?? "", /^image vllm\/vllm-openai:v0\.10\.1 \(vLLM 0\.10\.1\) has ENTRYPOINT \["python3","-m","vllm\.entrypoints\.openai\.api_server"\], not vllm serve: .*set entrypoint = \["vllm", "serve"\] in the recipe/);
  assert.match(both[1] ?? "", /^image vllm\/vllm-openai:v0\.10\.1 has vLLM 0\.10\.1, older than 0\.11\.1, the first whose vllm serve takes --nnodes/);
  assert.match(vllmImage.problems(IMAGE, { entrypoint: null, version: null }, { backend: "mp" })[0] ?? "", /\(vLLM version unknown\) has no ENTRYPOINT/);
  // The recipe's entrypoint replaces the image's; Ray ranks bring their own and pass no --nnodes.
  assert.deepEqual(vllmImage.problems(IMAGE, { ...old, version: "0.12.0" }, { backend: "mp", entrypoint: ["vllm", "serve"] }), []);
  assert.deepEqual(vllmImage.problems(IMAGE, old, { backend: "ray" }), []);
});

const NO_PYTHON: ExecResult = { code: 127, stdout: "", stderr: 'exec: "python3": executable file not found in $PATH' };

/** A node whose Docker answers inspect and run from canned results (the parser dump's apart), counting the runs. */
function fakeNode(entrypoint: string, versionRun: ExecResult, parserRun: ExecResult = NO_PYTHON): { docker: Docker; runs: string[][] } {
  const runs: string[][] = [];
  const transport: Transport = {
    node: "n1",
    exec: async (argv) => {
      if (argv[1] === "image") return { code: 0, stdout: `${entrypoint}\n`, stderr: "" };
      runs.push([...argv]);
      return argv[6] === "python3" ? parserRun : versionRun;
    },
    stream: () => {
      throw new Error("not used");
    },
    spawn: () => {
      throw new Error("not used");
    },
  };
  return { docker: new SshDocker(transport), runs };
}

function practicePlan(): Plan {
  const r = resolveRecipe("practice-2x", fileRecipeSource(["recipes"]));
  assert.ok(r.recipe);
  const c = parseCluster("c.toml", `name = "c"\n[[nodes]]\nname = "n1"\nhost = "n1"\nuser = "u"\n[[nodes]]\nname = "n2"\nhost = "n2"\nuser = "u"\n`).cluster;
  assert.ok(c);
  const p = planDeployment(r.recipe, c);
  assert.ok(p.ok);
  return p.plan;
}

test("preflight's image check: reads once per image ID (the store keeps it), asks again when the version could not be read", async () => {
  const store = new Store(":memory:");
  const cache: ImageFactsCache = { get: (id) => store.imageFacts(id), put: (id, f) => store.saveImageFacts(id, f, "2026-01-01T00:00:00Z") };
  const plan = practicePlan();
  const good = fakeNode('["vllm","serve"]', { code: 0, stdout: "0.12.0\n", stderr: "" });
  const first = await checkImage(plan, good.docker, "sha256:aaa", cache);
  const noParser = "`python3` in the image could not describe the engine's parser (exit 127: not found)";
  assert.deepEqual(first, { problems: [], version: "0.12.0", tableJudged: noParser });
  assert.deepEqual(good.runs.find((r) => r[6] === "vllm"), ["docker", "run", "--rm", "--network", "none", "--entrypoint", "vllm", "--", "practice-engine:local", "--version"]);
  assert.deepEqual(good.runs.find((r) => r[6] === "python3")?.slice(0, 9), ["docker", "run", "--rm", "--network", "none", "--entrypoint", "python3", "--", "practice-engine:local"]);
  const again = await checkImage(plan, good.docker, "sha256:aaa", cache);
  assert.deepEqual(again, first);
  assert.equal(good.runs.length, 2, "the second boot of the same image ID runs nothing in it");
  const kept = store.imageFacts("sha256:aaa");
  assert.deepEqual({ ...kept, parserProgram: typeof kept?.parserProgram }, { entrypoint: ["vllm", "serve"], version: "0.12.0", parserUnread: noParser, parserProgram: "string" });

  const silent = fakeNode('["vllm","serve"]', { code: 127, stdout: "", stderr: "exec: \"vllm\": executable file not found in $PATH" });
  const unread = await checkImage(plan, silent.docker, "sha256:bbb", cache);
  assert.deepEqual(unread.problems, []);
  assert.equal(unread.version, undefined);
  assert.match(unread.unread ?? "", /vllm --version` in the image printed no version \(exit 127: .*not found/);
  assert.equal(store.imageFacts("sha256:bbb"), undefined, "an incomplete reading is not kept");

  const python = fakeNode('["python3","-m","vllm.entrypoints.openai.api_server"]', { code: 0, stdout: "0.10.2\n", stderr: "" });
  const refused = await checkImage(plan, python.docker, "sha256:ccc", cache);
  assert.equal(refused.problems.length, 2);
  assert.match(refused.problems.join("\n"), /image practice-engine:local \(vLLM 0\.10\.2\) has ENTRYPOINT/);
  store.close();
});

test("boot history records the engine version each boot ran", () => {
  const store = new Store(":memory:");
  const boot = { deployment: "d", recipe: "r", recipe_hash: "h", cluster: "c", served_model: "m", endpoint: "http://x:8000", nodes: ["n1"], started_at: "2026-01-01T00:00:00Z" };
  store.beginBoot({ ...boot, engine_version: "0.12.0" });
  store.beginBoot(boot);
  const [second, first] = store.history(undefined, 10);
  assert.equal(first?.engine_version, "0.12.0");
  assert.equal(second?.engine_version, undefined);
  store.close();
});

test("preflight's image check: the image's own parser judges the recipe's args (the judge gets its table), read once per image ID", async () => {
  const store = new Store(":memory:");
  const cache: ImageFactsCache = { get: (id) => store.imageFacts(id), put: (id, f) => store.saveImageFacts(id, f, "2026-01-01T00:00:00Z") };
  const plan = practicePlan();
  const table = JSON.parse(readFileSync("src/engine/vllm/parser-table.json", "utf8")) as { actions: { option_strings: string[] }[] };
  // An image whose vLLM lacks --enable-prefix-caching, which practice-2x passes.
  const lacking = { ...table, engine_version: "0.30.0", actions: table.actions.filter((a) => !a.option_strings.includes("--enable-prefix-caching")) };
  const node = fakeNode('["vllm","serve"]', { code: 0, stdout: "0.30.0\n", stderr: "" }, { code: 0, stdout: `INFO log line\n${DUMP_SENTINEL}\n${JSON.stringify(lacking)}\n`, stderr: "" });
  const judged: EngineFlags[] = [];
  const judge = (flags: EngineFlags): string[] => {
    judged.push(flags);
    return flags.known?.includes("--enable-prefix-caching") === false ? ["recipes/practice-2x/recipe.toml:27:5: error: --enable-prefix-caching is not a flag of vLLM 0.30.0 in image practice-engine:local"] : [];
  };
  const r = await checkImage(plan, node.docker, "sha256:ddd", cache, undefined, judge);
  assert.equal(judged.length, 1);
  assert.deepEqual(judged[0]?.judge, { by: "image", engine: "vLLM", version: "0.30.0", image: "practice-engine:local" });
  assert.equal(r.problems.length, 1);
  assert.match(r.problems[0] ?? "", /^the args of practice-2x, judged by vLLM 0\.30\.0's own parser in image practice-engine:local \(read on n1\):\n {6}recipes\/practice-2x\/recipe\.toml:27:5: error: --enable-prefix-caching/);
  assert.equal(r.tableJudged, undefined);
  await checkImage(plan, node.docker, "sha256:ddd", cache, undefined, judge);
  assert.equal(node.runs.length, 2, "the parser is read once per image ID");
  assert.equal(judged.length, 2, "and judges every boot");
  store.close();
});

test("preflight's image check: a parser read that failed for now is asked again, a lasting one is kept; a dump's failure never refuses the boot", async () => {
  const store = new Store(":memory:");
  const cache: ImageFactsCache = { get: (id) => store.imageFacts(id), put: (id, f) => store.saveImageFacts(id, f, "2026-01-01T00:00:00Z") };
  const plan = practicePlan();
  const version = { code: 0, stdout: "0.12.0\n", stderr: "" };
  // Killed (137: the OOM killer on a busy node): not kept, so the next boot reads the parser again.
  const killed = fakeNode('["vllm","serve"]', version, { code: 137, stdout: "", stderr: "" });
  const first = await checkImage(plan, killed.docker, "sha256:eee", cache);
  assert.deepEqual(first.problems, []);
  assert.match(first.tableJudged ?? "", /exit 137/);
  assert.equal(store.imageFacts("sha256:eee"), undefined);
  // A dump that outlives its timeout (exit 124) leaves the boot alone: the table judges.
  const slow = fakeNode('["vllm","serve"]', version, { code: 124, stdout: "", stderr: "" });
  assert.deepEqual((await checkImage(plan, slow.docker, "sha256:fff", cache)).problems, []);
  // A stored reading of a format this launcher cannot read is read again, not used.
  store.saveImageFacts("sha256:ggg", { entrypoint: ["vllm", "serve"], version: "0.12.0", parserProgram: "x", parser: { format: 99 } as never }, "2026-01-01T00:00:00Z");
  const table = readFileSync("src/engine/vllm/parser-table.json", "utf8");
  const fresh = fakeNode('["vllm","serve"]', version, { code: 0, stdout: `${DUMP_SENTINEL}\n${JSON.stringify(JSON.parse(table))}\n`, stderr: "" });
  const again = await checkImage(plan, fresh.docker, "sha256:ggg", cache);
  assert.equal(again.judged?.flags.judge?.by, "image");
  assert.equal(fresh.runs.length, 1, "only the parser is asked again: the version was kept");
  store.close();
});
