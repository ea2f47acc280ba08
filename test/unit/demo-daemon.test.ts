import assert from "node:assert/strict";
import { lstatSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { Command } from "commander";
import { UserError } from "../../src/config/errors.js";
import { readTextFile } from "../../src/config/read-file.js";
import { SESSION_ROUTES } from "../../src/contract/read-api.js";
import { daemonConfig, type ServeFlags } from "../../src/daemon/config.js";
import type { Daemon } from "../../src/daemon/daemon.js";
import { parseKeyFile } from "../../src/gateway/auth.js";
import { askLink } from "../../src/cli/dashboard.js";
import { daemonArgs, demoEnding, writeAdminKey } from "../../src/cli/demo.js";
import { registerServe } from "../../src/cli/serve.js";
import type { Output } from "../../src/app/output.js";
import { HOME_ADMIN_KEY, startHomeDaemon } from "../support/home-daemon.js";

// What `launcher demo` starts its daemon with and ends by printing: serve's real flags parsed from
// the demo's argv, the admin key's file, and the dashboard's link asked through the owner socket
// of a daemon with an admin key (the demo's own daemon runs only as root, on the practice cluster).

const silent: Output = { out: () => undefined, err: () => undefined, warn: () => undefined, json: () => undefined, diagnostics: () => undefined };

function withFolder(run: (dir: string) => Promise<void> | void): Promise<void> | void {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-demo-daemon-"));
  const done = (): void => rmSync(dir, { recursive: true, force: true });
  try {
    const r = run(dir);
    if (r instanceof Promise) return r.finally(done);
    done();
  } catch (e) {
    done();
    throw e;
  }
}

/** serve's flags as its real command reads `args` (its action replaced: nothing starts). */
async function serveFlags(args: string[]): Promise<ServeFlags> {
  const program = new Command().exitOverride();
  registerServe(program, silent);
  let flags: ServeFlags | undefined;
  program.commands.find((c) => c.name() === "serve")?.action((f: ServeFlags) => void (flags = f));
  await program.parseAsync(args, { from: "user" });
  assert.ok(flags !== undefined);
  return flags;
}

test("the demo's daemon serves the control API on loopback with the key of its 0600 file, which is never on its argv (fails before: serve ran as a gateway only)", async () => {
  await withFolder(async (dir) => {
    const keyFile = path.join(dir, "admin.key");
    writeAdminKey(keyFile);
    assert.equal(lstatSync(keyFile).mode & 0o777, 0o600);
    const keys = parseKeyFile(readFileSync(keyFile, "utf8"));
    assert.equal(keys.length, 1);
    assert.match(keys[0] as string, /^[A-Za-z0-9_-]{43}$/, "256 random bits, base64url");
    const argv = daemonArgs("127.0.0.1:8080", "/tmp/launcher-demo/rig/cluster.toml", keyFile);
    assert.ok(!argv.some((a) => a.includes(keys[0] as string)), "the key is not on the command line");
    const flags = await serveFlags(argv);
    const config = daemonConfig(flags, {}, { readFile: readTextFile, clusterPath: (c) => c ?? "none" });
    assert.equal(config.control, true);
    assert.deepEqual(config.adminKeys, keys);
    assert.deepEqual(config.apiKeys, []);
    assert.equal(config.listen.host, "127.0.0.1");
    assert.deepEqual(config.clusterFiles, ["/tmp/launcher-demo/rig/cluster.toml"]);
  });
});

test("each admin key is new, and its file is made only where nothing is: a planted file or link is refused, never written through", () =>
  withFolder((dir) => {
    const a = path.join(dir, "a.key");
    const b = path.join(dir, "b.key");
    writeAdminKey(a);
    writeAdminKey(b);
    assert.notEqual(readFileSync(a, "utf8"), readFileSync(b, "utf8"));
    assert.throws(() => writeAdminKey(a), (e: unknown) => e instanceof UserError && /cannot be made \(EEXIST\)/.test(e.message));
    const victim = path.join(dir, "victim");
    writeFileSync(victim, "keep");
    const link = path.join(dir, "link.key");
    symlinkSync(victim, link);
    assert.throws(() => writeAdminKey(link), (e: unknown) => e instanceof UserError);
    assert.equal(readFileSync(victim, "utf8"), "keep");
  }));

test("the demo ends with the commands to try and, last, a dashboard link asked through the owner socket: an admin's single-use code, never the key", { timeout: 60_000 }, async () => {
  await withFolder(async (dir) => {
    let daemon: Daemon | undefined;
    try {
      daemon = await startHomeDaemon(dir, []);
      const socket = (daemon as unknown as { running: { socket: { path: string } | undefined } }).running.socket?.path;
      assert.ok(socket !== undefined);
      const url = `http://127.0.0.1:${daemon.port}`;
      const link = await askLink({ url, socket });
      const lines = demoEnding({ gateway: url, link, fetchedNode: "/opt/node 24" });
      const text = lines.join("\n");
      assert.equal(lines.at(-1), `  ${link.url}`, "the link is the last line");
      assert.match(link.url, new RegExp(`^${url.replace(/[.]/g, "\\.")}/\\?code=[A-Za-z0-9_-]{22,128}$`));
      assert.ok(!text.includes(HOME_ADMIN_KEY), "no key is printed");
      assert.match(text, /expires within a minute/);
      for (const cmd of ["npx launcher top", "npx launcher dashboard", "npx launcher status", "npx launcher down practice-2x", "./scripts/demo --down"]) assert.ok(text.includes(`  ${cmd}`), cmd);
      assert.ok(text.includes(`export PATH='/opt/node 24/bin':"$PATH"`), "the fetched Node comes first, quoted");
      assert.ok(text.includes(`ssh -L ${daemon.port}:127.0.0.1:${daemon.port}`), "how to reach it from another machine");
      const code = new URL(link.url).searchParams.get("code");
      const post = (body: unknown): Promise<Response> => fetch(`${url}${SESSION_ROUTES.signIn}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      const signedIn = await post({ code });
      assert.ok(signedIn.ok, `sign-in answered ${signedIn.status}`);
      const cookie = (signedIn.headers.get("set-cookie") ?? "").split(";")[0] as string;
      const session = (await (await fetch(`${url}${SESSION_ROUTES.session}`, { headers: { cookie } })).json()) as { role: string };
      assert.equal(session.role, "admin", "the demo's link acts as the admin (the daemon has an admin key)");
      assert.equal((await post({ code })).status, 401, "it works once");
    } finally {
      await daemon?.stop();
    }
  });
});

test("the ending says no PATH line where this Node was not fetched, and names the daemon's own port for a tunnel", () => {
  const link = { url: `http://127.0.0.1:8081/?code=${"a".repeat(43)}`, expires_at: "2026-12-05T05:00:00.000Z" };
  const lines = demoEnding({ gateway: "http://127.0.0.1:8081", link });
  assert.ok(!lines.some((l) => l.includes("export PATH")));
  assert.ok(lines.some((l) => l.includes("ssh -L 8081:127.0.0.1:8081")));
  assert.ok(lines.some((l) => l.includes("curl -s http://127.0.0.1:8081/v1/models")));
  assert.equal(lines.at(-1), `  ${link.url}`);
});
