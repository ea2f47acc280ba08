import assert from "node:assert/strict";
import { test } from "node:test";
import { modelInfoUrl, parseBlobListing, parseModelInfo, RESUMED_PARTIAL, STALE_PARTIAL, stillNeeded, type HubFile } from "../../src/plan/pull-space.js";

const COMMIT = "5e1f0c4a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f";
const SHA_A = "a".repeat(64);
const SHA_B = "b".repeat(64);
const GIT_CONFIG = "0123456789abcdef0123456789abcdef01234567";
const MiB = 1 << 20;

// The shape of the Hub's GET /api/models/{repo}/revision/{rev}?blobs=true (huggingface_hub hf_api.py
// model_info with files_metadata=True reads siblings[].rfilename, size, blobId, lfs.{size,sha256,pointerSize}).
const INFO = JSON.stringify({
  _id: "x",
  id: "org/model",
  sha: COMMIT,
  siblings: [
    { rfilename: "config.json", size: 70, blobId: GIT_CONFIG },
    { rfilename: "model-00001-of-00002.safetensors", size: 6 * MiB, blobId: "1".repeat(40), lfs: { size: 6 * MiB, sha256: SHA_A, pointerSize: 134 } },
    { rfilename: "model-00002-of-00002.safetensors", size: 64 * MiB, blobId: "2".repeat(40), lfs: { size: 64 * MiB, sha256: SHA_B, pointerSize: 134 } },
    // The same content under a second name: one blob.
    { rfilename: "copy/model-00002-of-00002.safetensors", size: 64 * MiB, blobId: "2".repeat(40), lfs: { size: 64 * MiB, sha256: SHA_B, pointerSize: 134 } },
  ],
});

test("pull space: the Hub's model info with blobs gives each file's size and the blob it is cached under", () => {
  const info = parseModelInfo(INFO);
  assert.ok(info);
  assert.equal(info.commit, COMMIT);
  assert.deepEqual(info.files.slice(0, 2), [
    { path: "config.json", size: 70, blob: GIT_CONFIG },
    { path: "model-00001-of-00002.safetensors", size: 6 * MiB, blob: SHA_A },
  ]);
  // Without sizes (a model info asked without blobs=true) or not JSON: no answer to count with.
  assert.equal(parseModelInfo(JSON.stringify({ sha: COMMIT, siblings: [{ rfilename: "config.json" }] })), undefined);
  assert.equal(parseModelInfo("<html>"), undefined);
  assert.equal(modelInfoUrl("http://10.0.0.1:8088/", "org/model", "refs/pr/1"), "http://10.0.0.1:8088/api/models/org/model/revision/refs%2Fpr%2F1?blobs=true");
});

const files = (): HubFile[] => (parseModelInfo(INFO) as { files: HubFile[] }).files;

test("pull space: an empty cache needs every distinct blob once", () => {
  assert.deepEqual(stillNeeded(files(), [], RESUMED_PARTIAL.download), { bytes: 70 + 6 * MiB + 64 * MiB, blobs: 3, resumed: 0 });
});

test("pull space: complete blobs count nothing, a resumed partial only its missing bytes", () => {
  const onDisk = parseBlobListing(`${GIT_CONFIG} 70\n${SHA_A} ${6 * MiB}\n${SHA_B}.incomplete ${15 * MiB}\n`);
  assert.deepEqual(stillNeeded(files(), onDisk, RESUMED_PARTIAL.download), { bytes: 49 * MiB, blobs: 1, resumed: 15 * MiB });
  // The sync resumes its own partial files, not huggingface_hub's.
  assert.deepEqual(stillNeeded(files(), onDisk, RESUMED_PARTIAL.sync), { bytes: 64 * MiB, blobs: 1, resumed: 0 });
});

test("pull space: a per-process partial of huggingface_hub >= 1.33 is not resumed, and one longer than its blob is started again", () => {
  const stale = `${SHA_B}.9e615687.incomplete`;
  assert.ok(STALE_PARTIAL.test(stale));
  assert.ok(!STALE_PARTIAL.test(`${SHA_B}.incomplete`), "the resumed name is not litter");
  assert.deepEqual(stillNeeded(files(), [{ name: stale, bytes: 30 * MiB }], RESUMED_PARTIAL.download).bytes, 70 + 70 * MiB);
  assert.deepEqual(stillNeeded(files(), [{ name: `${SHA_A}.incomplete`, bytes: 7 * MiB }], RESUMED_PARTIAL.download), { bytes: 70 + 70 * MiB, blobs: 3, resumed: 0 });
});
