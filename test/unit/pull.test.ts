import assert from "node:assert/strict";
import { test } from "node:test";
import { UserError } from "../../src/config/errors.js";
import { CONTAINER_HF_HOME, downloadRunArgs, hfHomeOfHub, type DownloadSpec } from "../../src/plan/pull.js";

const spec: DownloadSpec = { image: "vllm/vllm-openai:v0.11.0", hfHome: "/mnt/nas/ai/huggingface", model: "deepseek-ai/DeepSeek-V4-Flash-Vision-Exp", name: "launcher-pull-0a1b2c3d", downloader: "hf" };

test("pull: docker run mounts the node's HF_HOME, names HF_TOKEN without its value, never pulls, and puts the image after --", () => {
  const args = downloadRunArgs({ ...spec, revision: "5e1f0c4a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f", endpoint: "http://10.231.0.12:8088" });
  assert.deepEqual(args, [
    "--rm", "--name", "launcher-pull-0a1b2c3d", "--network", "host", "--pull", "never",
    "--volume", `/mnt/nas/ai/huggingface:${CONTAINER_HF_HOME}`,
    "--env", `HF_HOME=${CONTAINER_HF_HOME}`, "--env", `HF_HUB_CACHE=${CONTAINER_HF_HOME}/hub`, "--env", "HF_HUB_OFFLINE=0",
    "--env", "HF_TOKEN",
    "--env", "HF_ENDPOINT=http://10.231.0.12:8088",
    "--entrypoint", "hf", "--", "vllm/vllm-openai:v0.11.0",
    "download", "deepseek-ai/DeepSeek-V4-Flash-Vision-Exp", "--revision", "5e1f0c4a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f",
  ]);
  // Without a pin or an endpoint: the Hub's main, huggingface.co.
  const plain = downloadRunArgs({ ...spec, downloader: "huggingface-cli" });
  assert.deepEqual(plain.slice(plain.indexOf("--entrypoint")), ["--entrypoint", "huggingface-cli", "--", spec.image, "download", spec.model]);
  assert.ok(!plain.some((a) => a.startsWith("HF_ENDPOINT")));
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
