import assert from "node:assert/strict";
import { closeSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { UserError } from "../../src/config/errors.js";
import { gatewayArgs, gatewayToStop, openGatewayLog, parsePid } from "../../src/cli/demo.js";

const CLUSTER = "/tmp/launcher-demo/rig/cluster.toml";
const ours = (argv: string[], uid = 0) => ({ uids: [uid, uid, uid, uid], argv });
const gatewayArgv = ["/usr/bin/node", "--import", "tsx", "/src/cli/main.ts", ...gatewayArgs("127.0.0.1:8080", CLUSTER)];

describe("the demo signals only the gateway it started", () => {
  test("serve.pid holds a plain positive pid or nothing: 0, -1, signs, spaces inside, huge numbers are no pid (fails before: Number() took them)", () => {
    assert.equal(parsePid("1234\n"), 1234);
    for (const bad of ["", "0", "-1", "+5", "1 2", "0x10", "1e3", "99999999", "abc", "4194305"]) assert.equal(parsePid(bad), undefined, bad);
  });

  test("its own launcher serve with the demo's cluster is stopped", () => {
    assert.deepEqual(gatewayToStop(4321, ours(gatewayArgv), 0, CLUSTER), { pid: 4321 });
  });

  test("a process of another uid, a reused pid running something else, or a gone one is left alone (fails before: any pid was killed)", () => {
    const leave = (r: ReturnType<typeof gatewayToStop>): string => ("leave" in r ? r.leave : "");
    assert.match(leave(gatewayToStop(7, ours(gatewayArgv, 65534), 0, CLUSTER)), /not yours alone/);
    assert.match(leave(gatewayToStop(7, { uids: [65534, 0, 0, 0], argv: gatewayArgv }, 0, CLUSTER)), /not yours alone/, "a real uid of another user");
    assert.match(leave(gatewayToStop(7, ours(["/usr/sbin/sshd", "-D"]), 0, CLUSTER)), /not the demo's launcher serve/);
    assert.match(leave(gatewayToStop(7, ours([...gatewayArgv.slice(0, -1), "/elsewhere/cluster.toml"]), 0, CLUSTER)), /not the demo's/);
    assert.match(leave(gatewayToStop(7, ours(["serve", "--listen", "0.0.0.0:80", "--cluster", CLUSTER]), 0, CLUSTER)), /not the demo's/);
    assert.match(leave(gatewayToStop(7, undefined, 0, CLUSTER)), /gone/);
    assert.match(leave(gatewayToStop(7, { uids: [], argv: gatewayArgv }, 0, CLUSTER)), /not yours alone/);
  });

  test("the gateway's log is never written through a link planted in its place (fails before: open(\"w\") followed it)", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "launcher-demo-log-"));
    try {
      const victim = path.join(dir, "victim");
      writeFileSync(victim, "keep");
      const log = path.join(dir, "serve.log");
      symlinkSync(victim, log);
      assert.throws(() => openGatewayLog(log), (e: unknown) => e instanceof UserError && /symbolic link/.test(e.message));
      assert.equal(readFileSync(victim, "utf8"), "keep");
      rmSync(log);
      closeSync(openGatewayLog(log));
      assert.equal(readFileSync(log, "utf8"), "");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
