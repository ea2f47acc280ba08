import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { chooseCluster, configDirs, namedClusterFile, type ClusterLookup } from "../../src/cluster/locate.js";

const dirs = configDirs({ XDG_CONFIG_HOME: "/cfg" }, "/home/u");
const OTHERS = "is owned by uid 65534, neither you (uid 1000) nor root";

/** Files that exist, and those of them the trust check refuses (with why); every file it was asked about. */
function lookup(files: string[], untrusted: string[], rest: Partial<ClusterLookup> = {}): { l: ClusterLookup; asked: string[] } {
  const asked: string[] = [];
  const l: ClusterLookup = {
    dirs,
    exists: (f) => files.includes(f),
    trust: (f) => {
      asked.push(f);
      return untrusted.includes(f) ? OTHERS : undefined;
    },
    ...rest,
  };
  return { l, asked };
}

describe("files of the current folder are read only when trusted", () => {
  test("an untrusted ./cluster.toml is passed over, with why, for the default cluster (fails before: it was read)", () => {
    const home = namedClusterFile(dirs, "home");
    const { l } = lookup(["cluster.toml", home], ["cluster.toml"], { defaultName: "home" });
    assert.deepEqual(chooseCluster(l), { found: true, file: home, source: "default", name: "home", skipped: [{ file: "cluster.toml", problem: OTHERS }] });
  });

  test("an untrusted ./cluster.toml and nothing else: no cluster, and the skip is said", () => {
    const { l } = lookup(["cluster.toml"], ["cluster.toml"]);
    const c = chooseCluster(l);
    assert.ok(!c.found && c.source === undefined && /no cluster file/.test(c.message));
    assert.deepEqual(c.skipped, [{ file: "cluster.toml", problem: OTHERS }]);
  });

  test("a trusted ./cluster.toml is read as before, and nothing is said", () => {
    const { l } = lookup(["cluster.toml"], []);
    assert.deepEqual(chooseCluster(l), { found: true, file: "cluster.toml", source: "cwd" });
  });

  test("a bare NAME that is an untrusted file here no longer shadows the named cluster (fails before: ./lab was read)", () => {
    const lab = namedClusterFile(dirs, "lab");
    for (const rest of [{ option: "lab" }, { env: "lab" }]) {
      const { l } = lookup(["lab", lab], ["lab"], rest);
      const c = chooseCluster(l);
      assert.ok(c.found && c.file === lab && c.name === "lab", JSON.stringify(c));
      assert.deepEqual(c.skipped, [{ file: "lab", problem: OTHERS }]);
    }
    const { l } = lookup(["lab", lab], [], { option: "lab" });
    assert.ok(chooseCluster(l).found && (chooseCluster(l) as { file: string }).file === "lab", "a trusted ./lab still wins, as before");
  });

  test("a path the user gives is their choice: never judged", () => {
    for (const option of ["/abs/c.toml", "./c.toml", "sub/c.toml", "cluster.toml"]) {
      const { l, asked } = lookup([option], [option], { option });
      const c = chooseCluster(l);
      assert.ok(c.found && c.file === option && c.skipped === undefined, option);
      assert.deepEqual(asked, [], option);
    }
  });
});
