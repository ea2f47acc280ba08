import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { launcher, launcherContainers, ok, onHost, PRACTICE_REVISION, practiceSuite, RIG_DIR, variant, within } from "./practice-cluster.js";

// A llama.cpp recipe that names its GGUF files in a Hub repo (`gguf`): `models pull` downloads only
// them (every part of the split file and the projector, none of the repo's other quantisations),
// `models sync` sends only them node to node, and only to the head: rpc-server reads no file, so
// the worker needs none, and the 2-node RPC boot's head reads them from the HF cache its container
// mounts, preflight (HF_HUB_OFFLINE=1) asking them of the head alone. The Hub is test/rig/hub-standin.mjs in a container on n2, as in
// fresh-hosts/pull.test.ts; the download runs in the practice image, whose `hf` is a stand-in (bin/hf).
const HOSTS = 2;
const dir = practiceSuite(HOSTS, "launcher-llamacpp-gguf-");
const HUB = "launcher-test-gguf-hub";
const ENDPOINT = "http://10.231.0.12:8089";
const CACHE = ".cache/practice/huggingface/hub";

/** A repo of several quantisations, a projector and small files; sizes in bytes. */
const FILES: Record<string, number> = {
  "README.md": 300,
  "config.json": 70,
  "Q4_K_M/tiny-Q4_K_M-00001-of-00002.gguf": 3 << 20,
  "Q4_K_M/tiny-Q4_K_M-00002-of-00002.gguf": 2 << 20,
  "Q8_0/tiny-Q8_0.gguf": 9 << 20,
  "mmproj-tiny-F16.gguf": 1 << 20,
};
const WANTED = ["Q4_K_M/tiny-Q4_K_M-00001-of-00002.gguf", "Q4_K_M/tiny-Q4_K_M-00002-of-00002.gguf", "mmproj-tiny-F16.gguf"];
const WANTED_BYTES = WANTED.reduce((s, f) => s + (FILES[f] ?? 0), 0);

const GGUF = (repo: string): string => `model = "${repo}"
gguf = { file = "Q4_K_M/tiny-Q4_K_M-00001-of-00002.gguf", mmproj = "mmproj-tiny-F16.gguf", revision = "${PRACTICE_REVISION}" }

[[extra_mounts]]
host = "~/.cache/practice/huggingface"
container = "/root/.cache/huggingface"
env = "HF_HOME"
read_only = true
`;

/** The files of a repo's snapshot on host i, sorted (links followed: each must reach its blob). */
const snapshotFiles = (i: number, repo: string): string[] =>
  onHost(i, ["sh", "-c", 'd="$HOME/$1/models--$2/snapshots/$3"; [ -d "$d" ] || exit 0; cd "$d" && find -L . -type f | sed "s|^\\./||" | sort', "sh", CACHE, repo.replace("/", "--"), PRACTICE_REVISION])
    .split("\n")
    .filter(Boolean);

/**
 * Host i's cache gets the whole repo at PRACTICE_REVISION, as huggingface_hub leaves it: each file
 * a blob named by its SHA-256, and snapshots/REV/PATH a relative link to it.
 */
function seedRepo(i: number, repo: string, from: string): void {
  onHost(i, [
    "sh", "-c",
    `d="$HOME/$1/models--$2"; rev="$3"; cd "$4" || exit 1
find . -type f | sed 's|^\\./||' | while read -r f; do
  h=$(sha256sum "$f" | cut -d' ' -f1); up="../../$(printf %s "$f" | tr -cd / | sed 's|/|../|g')"
  mkdir -p "$d/blobs" "$d/snapshots/$rev/$(dirname "$f")" && cp "$f" "$d/blobs/$h" && ln -sfn "\${up}blobs/$h" "$d/snapshots/$rev/$f" || exit 1
done; mkdir -p "$d/refs" && printf %s "$rev" > "$d/refs/main"`,
    "sh", CACHE, repo.replace("/", "--"), PRACTICE_REVISION, from,
  ]);
}

interface HubRequest {
  readonly method: string;
  readonly path: string;
}
const hubGets = (repo: string): string[] =>
  onHost(2, ["docker", "logs", HUB])
    .split("\n")
    .filter((l) => l.startsWith('{"method"'))
    .map((l) => JSON.parse(l) as HubRequest)
    .filter((r) => r.method === "GET" && r.path.startsWith(`/${repo}/resolve/`))
    .map((r) => r.path.slice(`/${repo}/resolve/${PRACTICE_REVISION}/`.length))
    .sort();

interface Synced {
  readonly nodes: readonly { readonly node: string; readonly action: string; readonly bytes: number }[];
}

describe("a llama.cpp recipe's GGUF files on the practice cluster", { concurrency: false }, () => {
  const root = path.join(dir, "hub");
  before(() => {
    for (const repo of ["practice/sync-gguf", "practice/pull-gguf"]) {
      for (const [file, bytes] of Object.entries(FILES)) {
        mkdirSync(path.dirname(path.join(root, repo, file)), { recursive: true });
        writeFileSync(path.join(root, repo, file), randomBytes(bytes));
      }
    }
    // The hosts' own users read the repo folders (seedRepo copies from them).
    chmodSync(dir, 0o755);
    onHost(2, [
      "docker", "run", "--detach", "--name", HUB, "--network", "host",
      "--volume", `${root}:/hub:ro`, "--volume", `${path.resolve("test/rig/hub-standin.mjs")}:/hub-standin.mjs:ro`,
      "--entrypoint", "/usr/local/bin/node", "--", "practice-engine:local",
      "/hub-standin.mjs", "--root", "/hub", "--listen", "10.231.0.12:8089", "--commit", PRACTICE_REVISION,
    ]);
    return within(15_000, "the Hub stand-in listening", async () => (onHost(2, ["docker", "logs", HUB]).includes('"listening"') ? true : undefined));
  });
  after(() => {
    spawnSync("ssh", ["-F", path.join(RIG_DIR, "ssh_config"), "lnch-n2", "--", "docker", "rm", "-f", HUB], { timeout: 30_000 });
  });

  test("models sync sends only the recipe's GGUF files (every part of the split file and the projector, no other quantisation) to the head only", async () => {
    seedRepo(2, "practice/sync-gguf", path.join(root, "practice/sync-gguf"));
    assert.deepEqual(snapshotFiles(2, "practice/sync-gguf"), Object.keys(FILES).sort(), "n2 (the worker) holds the whole repo");
    const recipe = variant(dir, "sync-gguf", "practice-llamacpp-2x", GGUF("practice/sync-gguf"));
    const before = await launcher(["models", recipe, "--json"]);
    assert.equal(before.code, 1, "missing on the head, which reads them");
    const r = JSON.parse(ok(await launcher(["models", "sync", recipe, "--json"], 120_000), "sync").stdout) as Synced;
    assert.deepEqual(r.nodes.map((n) => [n.node, n.action]), [["n1", "copied"], ["n2", "had"]]);
    assert.equal(r.nodes[0]?.bytes, WANTED_BYTES, "the GGUF files' bytes, nothing else");
    assert.deepEqual(snapshotFiles(1, "practice/sync-gguf"), [...WANTED].sort());
    const report = JSON.parse(ok(await launcher(["models", recipe, "--json"]), "models").stdout) as { ok: boolean; nodes: { node: string; needed: boolean }[] };
    assert.equal(report.ok, true);
    assert.deepEqual(report.nodes.map((n) => [n.node, n.needed]), [["n1", true], ["n2", false]], "the worker reads no GGUF file");
  });

  test("models pull downloads only the GGUF files, syncs them, and the 2-node RPC boot's head reads them from the cache", async () => {
    const recipe = variant(dir, "pull-gguf", "practice-llamacpp-2x", GGUF("practice/pull-gguf"));
    const r = JSON.parse(ok(await launcher(["models", "pull", recipe, "--json"], 240_000, { HF_ENDPOINT: ENDPOINT, HF_TOKEN: "" }), "pull").stdout) as { download?: { node: string }; sync: Synced };
    assert.equal(r.download?.node, "n1");
    assert.deepEqual(hubGets("practice/pull-gguf"), [...WANTED].sort(), "the Hub was asked for the GGUF files only");
    assert.deepEqual(snapshotFiles(1, "practice/pull-gguf"), [...WANTED].sort(), "n1, the head");
    assert.deepEqual(snapshotFiles(2, "practice/pull-gguf"), [], "n2, a worker, gets none: rpc-server reads no file");
    assert.deepEqual(r.sync.nodes.map((n) => [n.node, n.action]), [["n1", "had"]]);
    try {
      // HF_HUB_OFFLINE=1: preflight refuses a node that lacks the files it reads; the worker reads none.
      const up = await launcher(["up", variant(dir, "pull-gguf", "practice-llamacpp-2x", `${GGUF("practice/pull-gguf")}\n[env]\nHF_HUB_OFFLINE = "1"\n`)]);
      assert.equal(up.code, 0, up.stderr);
      const args = JSON.parse(onHost(1, ["docker", "inspect", "--format", "{{json .Args}}", "--", "launcher-pull-gguf-r0"])) as string[];
      const snap = `/root/.cache/huggingface/hub/models--practice--pull-gguf/snapshots/${PRACTICE_REVISION}`;
      assert.equal(args[args.indexOf("--model") + 1], `${snap}/Q4_K_M/tiny-Q4_K_M-00001-of-00002.gguf`);
      assert.equal(args[args.indexOf("--mmproj") + 1], `${snap}/mmproj-tiny-F16.gguf`);
      const status = JSON.parse(ok(await launcher(["status", "--json"]), "status").stdout) as { deployments: { deployment: string; status: string }[] };
      assert.equal(status.deployments.find((x) => x.deployment === "pull-gguf")?.status, "serving");
    } finally {
      ok(await launcher(["down", "deployment/pull-gguf", "--grace", "1"]), "down");
    }
    assert.deepEqual(launcherContainers(HOSTS), []);
  });
});
