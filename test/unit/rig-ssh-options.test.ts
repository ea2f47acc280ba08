import assert from "node:assert/strict";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import { QUICK_SILENCE_SSH, withSshOptions } from "../integration/practice-cluster.js";

// The practice cluster file of a file that cuts links (test/integration/practice-cluster.ts).

const RIG_FILE = `# Practice cluster made by test/rig/rig.sh
name = "practice"

[ssh]
config = "ssh_config"          # relative to this file

[docker]
run_args = ["--network", "host"]

[[nodes]]
name = "n1"
host = "lnch-n1"
`;

test("the rig's cluster file with ssh options: launcher reads them as the [ssh] section's options, the rest unchanged", () => {
  const parsed = parseCluster("/tmp/rig/cluster.toml", withSshOptions(RIG_FILE, QUICK_SILENCE_SSH));
  assert.deepEqual(parsed.diagnostics ?? [], []);
  assert.deepEqual(parsed.cluster?.ssh.options, [...QUICK_SILENCE_SSH]);
  assert.equal(parsed.cluster?.ssh.config, "/tmp/rig/ssh_config");
  assert.deepEqual(parsed.cluster?.run_args, ["--network", "host"]);
  assert.deepEqual(parsed.cluster?.nodes.map((n) => n.host), ["lnch-n1"]);
});

test("a cluster file without an [ssh] section, or with options already, is refused rather than given a second key", () => {
  assert.throws(() => withSshOptions(RIG_FILE.replace("[ssh]\n", ""), QUICK_SILENCE_SSH), /\[ssh\] section without options/);
  assert.throws(() => withSshOptions(withSshOptions(RIG_FILE, ["ConnectTimeout=3"]), QUICK_SILENCE_SSH), /\[ssh\] section without options/);
});
