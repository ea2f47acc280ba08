import assert from "node:assert/strict";
import { closeSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { UserError } from "../../src/config/errors.js";
import { daemonArgs, daemonToStop, openDaemonLog, parsePid } from "../../src/cli/demo.js";

const CLUSTER = "/tmp/launcher-demo/rig/cluster.toml";
const KEY = "/tmp/launcher-demo/daemon/admin.key";
const ours = (argv: string[], uid = 0) => ({ uids: [uid, uid, uid, uid], argv });
const daemonArgv = ["/usr/bin/node", "--import", "tsx", "/src/cli/main.ts", ...daemonArgs("127.0.0.1:8080", CLUSTER, KEY)];
/** The gateway without the control API that a demo of an earlier launcher started. */
const gatewayArgv = ["/usr/bin/node", "/src/cli/main.ts", "serve", "--listen", "127.0.0.1:8080", "--cluster", CLUSTER];

describe("the demo signals only the daemon it started", () => {
  test("serve.pid holds a plain positive pid or nothing: 0, -1, signs, spaces inside, huge numbers are no pid (fails before: Number() took them)", () => {
    assert.equal(parsePid("1234\n"), 1234);
    for (const bad of ["", "0", "-1", "+5", "1 2", "0x10", "1e3", "99999999", "abc", "4194305"]) assert.equal(parsePid(bad), undefined, bad);
  });

  test("its own launcher serve --control with the demo's cluster and key file is stopped, and so is the gateway-only serve an earlier demo left", () => {
    assert.deepEqual(daemonToStop(4321, ours(daemonArgv), 0, CLUSTER, KEY), { pid: 4321 });
    assert.deepEqual(daemonToStop(4322, ours(gatewayArgv), 0, CLUSTER, KEY), { pid: 4322 });
  });

  test("a process of another uid, a reused pid running something else, or a gone one is left alone (fails before: any pid was killed)", () => {
    const leave = (r: ReturnType<typeof daemonToStop>): string => ("leave" in r ? r.leave : "");
    assert.match(leave(daemonToStop(7, ours(daemonArgv, 65534), 0, CLUSTER, KEY)), /not yours alone/);
    assert.match(leave(daemonToStop(7, { uids: [65534, 0, 0, 0], argv: daemonArgv }, 0, CLUSTER, KEY)), /not yours alone/, "a real uid of another user");
    assert.match(leave(daemonToStop(7, ours(["/usr/sbin/sshd", "-D"]), 0, CLUSTER, KEY)), /not the demo's launcher serve/);
    assert.match(leave(daemonToStop(7, ours([...daemonArgv.slice(0, -1), "/elsewhere/admin.key"]), 0, CLUSTER, KEY)), /not the demo's/);
    assert.match(leave(daemonToStop(7, ours([...gatewayArgv.slice(0, -1), "/elsewhere/cluster.toml"]), 0, CLUSTER, KEY)), /not the demo's/);
    assert.match(leave(daemonToStop(7, ours(["serve", "--listen", "0.0.0.0:80", "--cluster", CLUSTER]), 0, CLUSTER, KEY)), /not the demo's/);
    assert.match(leave(daemonToStop(7, ours(daemonArgs("0.0.0.0:80", CLUSTER, KEY)), 0, CLUSTER, KEY)), /not the demo's/);
    assert.match(leave(daemonToStop(7, undefined, 0, CLUSTER, KEY)), /gone/);
    assert.match(leave(daemonToStop(7, { uids: [], argv: daemonArgv }, 0, CLUSTER, KEY)), /not yours alone/);
  });

  test("the daemon's log is never written through a link planted in its place (fails before: open(\"w\") followed it)", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "launcher-demo-log-"));
    try {
      const victim = path.join(dir, "victim");
      writeFileSync(victim, "keep");
      const log = path.join(dir, "serve.log");
      symlinkSync(victim, log);
      assert.throws(() => openDaemonLog(log), (e: unknown) => e instanceof UserError && /symbolic link/.test(e.message));
      assert.equal(readFileSync(victim, "utf8"), "keep");
      rmSync(log);
      closeSync(openDaemonLog(log));
      assert.equal(readFileSync(log, "utf8"), "");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
