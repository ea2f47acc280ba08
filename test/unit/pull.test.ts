import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { PassThrough } from "node:stream";
import type { ClusterNode } from "../../src/cluster/cluster.js";
import { RemoteError, UserError } from "../../src/config/errors.js";
import type { TransferProgress } from "../../src/nodes/progress.js";
import { pullModel } from "../../src/transfer/pull.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import { COMMAND_NOT_FOUND, CONTAINER_HF_HOME, READ_TOKEN, downloadRunArgs, hfHomeOfHub, type DownloadSpec } from "../../src/plan/pull.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";
import type { Recipe } from "../../src/recipe/recipe.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { SshDocker } from "../../src/remote/docker.js";
import type { Transport } from "../../src/remote/transport.js";

const spec: DownloadSpec = { image: "vllm/vllm-openai:v0.11.0", hfHome: "/mnt/nas/ai/huggingface", model: "deepseek-ai/DeepSeek-V4-Flash-Vision-Exp", name: "launcher-pull-0a1b2c3d", downloader: "hf" };

test("pull: docker run mounts the node's HF_HOME, keeps HF_TOKEN out of the container's config, never pulls, and puts the image after --", () => {
  const args = downloadRunArgs({ ...spec, revision: "5e1f0c4a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f", endpoint: "http://10.231.0.12:8088" });
  assert.deepEqual(args, [
    "--rm", "--interactive", "--name", "launcher-pull-0a1b2c3d", "--network", "host", "--pull", "never",
    "--volume", `/mnt/nas/ai/huggingface:${CONTAINER_HF_HOME}`,
    "--env", `HF_HOME=${CONTAINER_HF_HOME}`, "--env", `HF_HUB_CACHE=${CONTAINER_HF_HOME}/hub`, "--env", "HF_HUB_OFFLINE=0",
    "--env", "HF_ENDPOINT=http://10.231.0.12:8088",
    "--entrypoint", "sh", "--", "vllm/vllm-openai:v0.11.0",
    "-c", READ_TOKEN, "hf",
    "download", "deepseek-ai/DeepSeek-V4-Flash-Vision-Exp", "--revision", "5e1f0c4a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f",
  ]);
  // Without a pin or an endpoint: the Hub's main, huggingface.co.
  const plain = downloadRunArgs({ ...spec, downloader: "huggingface-cli" });
  assert.deepEqual(plain.slice(plain.indexOf("--entrypoint")), ["--entrypoint", "sh", "--", spec.image, "-c", READ_TOKEN, "huggingface-cli", "download", spec.model]);
  assert.ok(!plain.some((a) => a.startsWith("HF_ENDPOINT")));
});

test("pull: HF_TOKEN is never an --env of the download container (docker would keep its value in Config.Env, which `docker inspect` shows)", () => {
  for (const args of [downloadRunArgs(spec), downloadRunArgs({ ...spec, endpoint: "http://10.231.0.12:8088", revision: "main" })]) {
    const envs = args.flatMap((a, i) => (a === "--env" || a === "-e" ? [args[i + 1] ?? ""] : a.startsWith("--env=") ? [a.slice(6)] : []));
    assert.ok(envs.length > 0 && !envs.some((e) => e === "HF_TOKEN" || e.startsWith("HF_TOKEN=")), `no HF_TOKEN among ${envs.join(" ")}`);
    assert.ok(!args.includes("--env-file"));
    // The token comes in on the container's stdin instead.
    assert.ok(args.includes("--interactive"));
  }
});

test("pull: the container's entrypoint takes the token from stdin's first line into HF_TOKEN and runs the downloader with the words as they are", () => {
  // The downloader here prints HF_TOKEN, its words, and what is left on stdin.
  const downloader = 'printf "%s|" "$HF_TOKEN" "$@"; cat';
  const r = spawnSync("sh", ["-c", READ_TOKEN, "sh", "-c", downloader, "hf", "download", "a b/c", "--revision", "$HOME"], { input: `${SECRET}\nrest\n`, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, `${SECRET}|download|a b/c|--revision|$HOME|rest\n`);
  // A downloader the image lacks: 127, which makes pull try the next one.
  const missing = spawnSync("sh", ["-c", READ_TOKEN, "launcher-no-such-downloader", "download", "x/y"], { input: `${SECRET}\n`, encoding: "utf8" });
  assert.equal(missing.status, COMMAND_NOT_FOUND);
  assert.ok(!`${missing.stdout}${missing.stderr}`.includes(SECRET));
});

test("pull: values that would be read as flags or leak a secret are user errors", () => {
  const bad: [Partial<DownloadSpec>, RegExp][] = [
    [{ image: "--privileged" }, /image/],
    [{ model: "-rf/x" }, /not a Hugging Face repo id/],
    [{ model: "a b/c" }, /not a Hugging Face repo id/],
    [{ revision: "--force-download" }, /not a branch, tag or commit/],
    [{ revision: "../../etc" }, /not a branch, tag or commit/],
    [{ endpoint: "ftp://mirror" }, /not an http\(s\) URL/],
    [{ endpoint: "https://user:hf_secret@mirror.example" }, /carries a user or password/],
  ];
  for (const [change, message] of bad) {
    assert.throws(() => downloadRunArgs({ ...spec, ...change } as DownloadSpec), (e: unknown) => e instanceof UserError && message.test(e.message), JSON.stringify(change));
  }
});

test("pull: HF_HOME is the hub folder's parent", () => {
  assert.equal(hfHomeOfHub("/home/ai/.cache/huggingface/hub"), "/home/ai/.cache/huggingface");
});

// ---- the use case, against a fake node: what crosses to the node, and what comes back ----

interface FakeRun {
  code: number;
  output: string;
  /** Never ends until killed (an interrupted download). */
  hang?: boolean;
  /** Called once the download has started. */
  started?: () => void;
}

/** What the fake node's cache and disk hold before the pull. */
interface FakeDisk {
  /** `NAME SIZE` lines of its blobs folder. */
  blobs?: string;
  free?: number;
  /** Stale partials whose lock a live download holds: the clean script keeps them. */
  locked?: string[];
}

/** The Hub's model info with blobs: a 70-byte config and a 64 MiB LFS shard. */
const SHARD_SHA = "b".repeat(64);
const HUB_INFO = JSON.stringify({
  sha: "5e1f0c4a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f",
  siblings: [
    { rfilename: "config.json", size: 70, blobId: "0123456789abcdef0123456789abcdef01234567" },
    { rfilename: "model.safetensors", size: 64 << 20, blobId: "1".repeat(40), lfs: { size: 64 << 20, sha256: SHARD_SHA, pointerSize: 134 } },
  ],
});

function fakeNode(runs: FakeRun[], disk: FakeDisk = {}) {
  const calls = { exec: [] as string[][], spawn: [] as string[][], stdin: [] as string[], execStdin: [] as string[] };
  let downloaded = false;
  const transport: Transport = {
    node: "n1",
    async exec(argv, options) {
      calls.exec.push([...argv]);
      calls.execStdin.push(options?.stdin ?? "");
      const script = argv[2] ?? "";
      if (argv[4] === "inspect") return { code: 0, stdout: downloaded ? INSPECTED : "missing no folder\n", stderr: "" };
      if (script.includes("curl")) return { code: 0, stdout: `${HUB_INFO}\n200`, stderr: "" };
      if (script.includes("-printf")) return { code: 0, stdout: disk.blobs ?? "", stderr: "" };
      if (script.includes("flock")) return { code: 0, stdout: argv.slice(6).filter((n) => !(disk.locked ?? []).includes(n)).map((n) => `removed ${n}\n`).join(""), stderr: "" };
      if (script.includes("df -Pk")) return { code: 0, stdout: `tools yes\npath ${argv[5] ?? ""}\nfree ${disk.free ?? 2 ** 40}\n`, stderr: "" };
      return { code: 0, stdout: "", stderr: "" };
    },
    async *stream() {
      return;
    },
    spawn(argv) {
      calls.spawn.push([...argv]);
      const run = runs.shift() ?? { code: 1, output: "no more runs" };
      const stdout = new PassThrough();
      const stdin = new PassThrough();
      let input = "";
      stdin.on("data", (d: Buffer) => (input += d.toString()));
      stdin.on("end", () => calls.stdin.push(input));
      let end: (r: { code: number; stderr: string }) => void = () => undefined;
      const done = new Promise<{ code: number; stderr: string }>((resolve) => (end = resolve));
      stdout.write(run.output);
      if (run.started) setImmediate(run.started);
      if (!run.hang) {
        stdout.end();
        if (run.code === 0) downloaded = true;
        setImmediate(() => end({ code: run.code, stderr: "" }));
      }
      return { stdin, stdout, done, kill: () => (stdout.end(), end({ code: 143, stderr: "" })) };
    },
  };
  const session = { cluster: { name: "c", nodes: [NODE] }, docker: new Map([["n1", new SshDocker(transport)]]) } as unknown as ClusterSession;
  return { session, calls };
}

const REV = "5e1f0c4a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f";
const hex = (s: string): string => Buffer.from(s).toString("hex");
/** What CACHE_PERL's inspect prints for the downloaded snapshot (src/transfer/hf-cache.ts). */
const INSPECTED = `ref ${hex("main")} ${hex(REV)}\nsnapshot\nL 70 ${hex("config.json")} ${hex(`../../blobs/${"0".repeat(40)}`)}\nL 64 ${hex("model.safetensors")} ${hex(`../../blobs/${"b".repeat(64)}`)}\nend\n`;
const NODE: ClusterNode = { name: "n1", rank: 0, host: "n1", user: "ai", home: "/home/ai", hca: [], gpus: 1 };
const SECRET = "hf_abcdefSECRET123";
const practice = (): Recipe => {
  const r = resolveRecipe("practice-2x", fileRecipeSource(["recipes"])).recipe;
  assert.ok(r);
  return r;
};
const quiet: TransferProgress = { node: () => undefined };

test("pull: the token goes on stdin only; an image without `hf` falls back to huggingface-cli; the cache is the HF_HOME mount's", async () => {
  const { session, calls } = fakeNode([{ code: 127, output: 'exec: "hf": executable file not found in $PATH' }, { code: 0, output: "fetching\n/launcher-hf/hub/models--practice--tiny-moe/snapshots/x\n" }]);
  const result = await pullModel(practice(), session, [NODE], { token: SECRET, endpoint: "http://10.0.0.1:8088" }, quiet, new AbortController().signal);
  assert.deepEqual([result.download?.node, result.download?.downloader, result.download?.revision], ["n1", "huggingface-cli", REV]);
  assert.deepEqual(calls.stdin, [`${SECRET}\n`, `${SECRET}\n`]);
  for (const argv of [...calls.spawn, ...calls.exec]) assert.ok(!argv.join(" ").includes(SECRET), `no token in ${argv.join(" ")}`);
  const [first, second] = calls.spawn;
  assert.equal(first?.[4], "/home/ai/.cache/practice/huggingface", "the HF_HOME mount's host path");
  assert.ok(first?.includes("hf") && second?.includes("huggingface-cli"));
});

test("pull: a missing image is a user error naming it and the node; a failure's output is shown with the token redacted", async () => {
  const missing = fakeNode([{ code: 125, output: "docker: Error response from daemon: No such image: practice-engine:local." }]);
  await assert.rejects(pullModel(practice(), missing.session, [NODE], {}, quiet, new AbortController().signal), (e: unknown) => e instanceof UserError && /image practice-engine:local is not on n1/.test(e.message) && /images push/.test(e.hint ?? ""));
  const failing = fakeNode([{ code: 1, output: `401 for Bearer ${SECRET}` }]);
  await assert.rejects(pullModel(practice(), failing.session, [NODE], { token: SECRET }, quiet, new AbortController().signal), (e: unknown) => e instanceof RemoteError && (e.detail ?? "").includes("401 for Bearer <redacted>") && !(e.detail ?? "").includes(SECRET));
});

test("pull: interrupted, the download's container is removed and the partial download is said to stay", async () => {
  const controller = new AbortController();
  const { session, calls } = fakeNode([{ code: 0, output: "model.safetensors: 1/2 bytes\n", hang: true, started: () => controller.abort() }]);
  const pulling = pullModel(practice(), session, [NODE], {}, quiet, controller.signal);
  await assert.rejects(pulling, (e: unknown) => e instanceof UserError && /interrupted: the partial download stays/.test(e.message));
  const name = calls.spawn[0]?.[calls.spawn[0].indexOf("--name") + 1];
  assert.match(name ?? "", /^launcher-pull-[0-9a-f]{8}$/);
  assert.deepEqual(calls.exec.at(-1), ["docker", "rm", "--force", "--", name]);
});

test("pull: a node without room for the model is an error naming node, path, free and needed before any container runs; the Hub is asked by the node with the token only as a header on stdin", async () => {
  const { session, calls } = fakeNode([{ code: 0, output: "" }], { free: 10 << 20 });
  await assert.rejects(
    pullModel(practice(), session, [NODE], { token: SECRET, endpoint: "http://10.0.0.1:8088" }, quiet, new AbortController().signal),
    (e: unknown) =>
      e instanceof UserError &&
      e.message.includes("n1: /home/ai/.cache/practice/huggingface/hub/models--practice--tiny-moe has 10.0 MiB free, needs 64.0 MiB") &&
      /--node/.test(e.hint ?? "") &&
      /nothing was downloaded/.test(e.hint ?? ""),
  );
  assert.deepEqual(calls.spawn, [], "no download container was started");
  const ask = calls.exec.findIndex((argv) => (argv[2] ?? "").includes("curl"));
  assert.ok(ask >= 0, "the node asked the Hub");
  assert.equal(calls.exec[ask]?.at(-1), "http://10.0.0.1:8088/api/models/practice/tiny-moe/revision/main?blobs=true");
  assert.equal(calls.execStdin[ask], `Authorization: Bearer ${SECRET}\n`);
  for (const argv of calls.exec) assert.ok(!argv.join(" ").includes(SECRET), `no token in ${argv.join(" ")}`);
});

test("pull: the bytes of a partial blob the downloader resumes count as there, and stale partials of a killed huggingface_hub are removed unless a live download holds their lock", async () => {
  const notes: string[] = [];
  const blobs = `${SHARD_SHA}.incomplete ${60 << 20}\n${SHARD_SHA}.0123abcd.incomplete ${30 << 20}\n${SHARD_SHA}.89abcdef.incomplete ${1 << 20}\n`;
  // 64 MiB + 70 bytes to get, 60 MiB of it there: 5 MiB free is enough.
  const { session, calls } = fakeNode([{ code: 0, output: "" }], { free: 5 << 20, blobs, locked: [`${SHARD_SHA}.89abcdef.incomplete`] });
  const result = await pullModel(practice(), session, [NODE], { note: (l) => notes.push(l) }, quiet, new AbortController().signal);
  assert.equal(result.download?.node, "n1");
  const clean = calls.exec.find((argv) => (argv[2] ?? "").includes("flock"));
  assert.deepEqual(clean?.slice(4), ["/home/ai/.cache/practice/huggingface/hub", "models--practice--tiny-moe", `${SHARD_SHA}.0123abcd.incomplete`, `${SHARD_SHA}.89abcdef.incomplete`], "only the per-process partials, never the resumed one");
  assert.ok(notes.includes("n1: removed 1 partial file(s) (30.0 MiB) that a killed huggingface_hub left and never resumes"), notes.join("\n"));
  // The same cache with 3 MiB free: 4 MiB is still needed.
  const short = fakeNode([{ code: 0, output: "" }], { free: 3 << 20, blobs });
  await assert.rejects(pullModel(practice(), short.session, [NODE], {}, quiet, new AbortController().signal), (e: unknown) => e instanceof UserError && /has 3\.0 MiB free, needs 4\.0 MiB/.test(e.message));
});
