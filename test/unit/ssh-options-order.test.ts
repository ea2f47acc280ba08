import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import type { ClusterNode, SshSettings } from "../../src/cluster/cluster.js";
import { sshArgs } from "../../src/remote/ssh.js";

// A cluster file's [ssh] options against launcher's own defaults, as the real OpenSSH reads the
// argv: it keeps the first value it obtains for each option (ssh_config(5)), so order decides.

const node = { name: "n1", host: "spark-1" } as ClusterNode;
/** What `ssh -G` says it would use for these settings: option name (lower case) -> value. */
function effective(options: SshSettings["options"]): Map<string, string> {
  // -F /dev/null: this machine's own ssh_config (an Include, a Match exec) has no say.
  const r = spawnSync("ssh", [...sshArgs(node, { config: "/dev/null", options }, "/tmp/launcher-test-ctl"), "-G", "--", node.host], { encoding: "utf8", timeout: 10_000 });
  assert.equal(r.status, 0, r.stderr);
  return new Map(r.stdout.split("\n").map((l) => [l.split(" ")[0] ?? "", l.split(" ").slice(1).join(" ")]));
}

test("a cluster file's ConnectTimeout and ServerAlive options are the ones ssh uses; without them, launcher's defaults", () => {
  const own = effective(["ConnectTimeout=3", "ServerAliveInterval=1", "ServerAliveCountMax=2"]);
  assert.deepEqual([own.get("connecttimeout"), own.get("serveraliveinterval"), own.get("serveralivecountmax")], ["3", "1", "2"]);
  const none = effective([]);
  assert.deepEqual([none.get("connecttimeout"), none.get("serveraliveinterval"), none.get("serveralivecountmax")], ["10", "5", "3"]);
});

test("a cluster file's options do not replace the connection sharing and batch mode launcher relies on", () => {
  const own = effective(["BatchMode=no", "ControlPath=/tmp/elsewhere/%C", "ControlPersist=no"]);
  assert.equal(own.get("batchmode"), "yes");
  assert.match(own.get("controlpath") ?? "", /^\/tmp\/launcher-test-ctl\//);
  assert.equal(own.get("controlpersist"), "60");
});
