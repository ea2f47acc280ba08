import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { launcher, ok, onHost, PRACTICE_REVISION, practiceSuite, seedModel, variant } from "./practice-cluster.js";

// A node's Hugging Face cache is written by the containers that mount it (every recipe mounts it,
// as root): `models sync` must neither read nor write outside the repo folder, whatever a
// container left there. Two hosts: n1 the source, n2 the target.
const dir = practiceSuite(2, "launcher-models-trust-");
const HUB = ".cache/practice/huggingface/hub";

/** Everything in host i's home outside the practice cache (path, type, size, sha256 of files): what must not change. */
const homeOutsideCache = (i: number): string =>
  onHost(i, ["sh", "-c", 'cd "$HOME" && find . -path ./.cache/practice -prune -o -path ./.docker -prune -o \\( -type f -exec sha256sum {} + \\) -o \\( ! -type f -printf "%y %p\\n" \\) | sort']);

async function refusedSync(repo: string, plant: () => void, expect: RegExp): Promise<void> {
  seedModel(1, 1 << 20, repo);
  const recipe = variant(dir, repo, "practice-2x", `model = "practice/${repo.replace(/^models--practice--/, "")}"\n`);
  plant();
  const before = [homeOutsideCache(1), homeOutsideCache(2)];
  const r = await launcher(["models", "sync", recipe, "--nodes", "n1,n2"], 120_000);
  assert.equal(r.code, 1, `refused: ${r.stdout}${r.stderr}`);
  assert.match(r.stderr, expect);
  assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/, "no stack trace");
  assert.equal(homeOutsideCache(1), before[0], "nothing outside the cache changed on n1");
  assert.equal(homeOutsideCache(2), before[1], "nothing outside the cache changed on n2 (its ~/.ssh included)");
}

const repoOn = (i: number, repo: string): string => `/home/lnchu${i}/${HUB}/${repo}`;

describe("models sync: a node's cache is untrusted input", { concurrency: false }, () => {
  test("the source's refs/main naming a path out of the repo: refused naming n1 and the file; n1's ~/.ssh is not read, n2's not written", async () => {
    const repo = "models--practice--trust-ref";
    // From snapshots/ of this layout, six `..` reach the home folder: the old code listed n1's
    // ~/.ssh as the snapshot and wrote it into n2's ~/.ssh.
    onHost(1, ["sh", "-c", 'printf "launcher test marker\\n" > "$HOME/.ssh/launcher-trust-marker"']);
    try {
      await refusedSync(repo, () => onHost(1, ["sh", "-c", 'printf %s "../../../../../../.ssh" > "$1/refs/main"', "sh", repoOn(1, repo)]), new RegExp(`n1: ${repoOn(1, repo)}/refs/main: it is neither a 40-hex commit`));
      assert.equal(onHost(2, ["sh", "-c", 'ls -A "$HOME/.ssh"']).includes("launcher-trust-marker"), false);
    } finally {
      onHost(1, ["rm", "-f", "/home/lnchu1/.ssh/launcher-trust-marker"]);
    }
  });

  test("the target's snapshot folder planted as a link to ~/.ssh: refused naming n2, nothing written through it", async () => {
    const repo = "models--practice--trust-snap";
    const plant = (): void => {
      onHost(2, ["sh", "-c", 'mkdir -p "$1/snapshots" && ln -sfn "$HOME/.ssh" "$1/snapshots/$2"', "sh", repoOn(2, repo), PRACTICE_REVISION]);
    };
    await refusedSync(repo, plant, new RegExp(`n2: .*refused.*\\n.*snapshots/${PRACTICE_REVISION} is a symbolic link`));
  });

  test("the target's blobs folder planted as a link to ~/.ssh: refused naming n2 before any byte moves, nothing written through it", async () => {
    const repo = "models--practice--trust-blobs";
    const plant = (): void => {
      onHost(2, ["sh", "-c", 'mkdir -p "$1" && ln -sfn "$HOME/.ssh" "$1/blobs"', "sh", repoOn(2, repo)]);
    };
    await refusedSync(repo, plant, /n2: .*refused.*\n.*blobs is a symbolic link/);
  });

  test("a clean cache still syncs, and every file on n2 matches n1's", async () => {
    const repo = "models--practice--trust-clean";
    seedModel(1, 1 << 20, repo);
    const recipe = variant(dir, repo, "practice-2x", `model = "practice/trust-clean"\n`);
    ok(await launcher(["models", "sync", recipe, "--nodes", "n1,n2"], 120_000), "sync");
    const sums = (i: number): string => onHost(i, ["sh", "-c", 'cd "$1/snapshots/$2" && sha256sum -- * | sort && cat "$1/refs/main"', "sh", repoOn(i, repo), PRACTICE_REVISION]);
    assert.equal(sums(2), sums(1));
  });
});
