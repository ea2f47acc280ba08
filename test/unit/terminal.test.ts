import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";
import { childrenOutliveTheTerminal, runLocal } from "../../src/remote/transport.js";

// This file's own process: the switch below is process-wide, as in `launcher serve`.
const groupOf = (pid: number | string): string => execFileSync("ps", ["-o", "pgid=", "-p", String(pid)], { encoding: "utf8" }).trim();

test("the daemon's children (ssh) leave the terminal's process group: a closed terminal's SIGHUP and Ctrl-C reach the daemon alone", async () => {
  const mine = groupOf(process.pid);
  const before = await runLocal("sh", ["-c", "ps -o pgid= -p $$"]);
  assert.equal(before.stdout.trim(), mine, "by default a child shares the group (Ctrl-C of a CLI reaches its ssh too)");
  childrenOutliveTheTerminal();
  const after = await runLocal("sh", ["-c", "echo $$; ps -o pgid= -p $$"]);
  const [pid, group] = after.stdout.trim().split(/\s+/);
  assert.notEqual(group, mine);
  assert.equal(group, pid, "the leader of a group of its own");
});
