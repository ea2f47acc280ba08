import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { RemoteError, reportError, UserError } from "../../src/config/errors.js";
import { Interrupted } from "../../src/config/abort.js";
import { BootRegistry, type BootRun } from "../../src/supervise/boots.js";
import { decodeError, decodeEvent, encodeError, encodeEvent, progressEvents, type UpEvent } from "../../src/boot/up-events.js";
import type { UpOutcome } from "../../src/boot/up-events.js";
import { cancelBoot, chooseDaemon, followBoot, submitBoot, type DaemonTarget } from "../../src/daemon/client.js";
import { keyChecker } from "../../src/gateway/auth.js";
import { controlApi } from "../../src/daemon/control.js";
import { CONTROL_PATHS } from "../../src/daemon/protocol.js";
import { CONTROL_PREFIX } from "../../src/contract/control-api.js";
import { daemonUnitText, systemdWord } from "../../src/daemon/systemd.js";
import { BootView, watchBoot } from "../../src/cli/boot-view.js";

const outcome: UpOutcome = { status: "ready", deployment: "d", endpoint: "http://n1:8000", served_model: "m", seconds: 1.5, boot: "b1" };

/** A boot that says a note, then waits for `release` (or its cancel, which rolls back like the real one). */
function gatedRun(release: Promise<void>): BootRun {
  return async (emit, signal) => {
    emit({ type: "note", text: "preflight ...", t: 1 });
    await new Promise<void>((resolve, reject) => {
      void release.then(resolve);
      signal.addEventListener("abort", () => reject(new RemoteError("launcher", `boot of d failed: ${(signal.reason as Interrupted).message}`, "rolled back: removed 1 container (n1/launcher-d-r0)")), { once: true });
    });
    return outcome;
  };
}

test("events: every kind survives the wire; errors come back as the class the error funnel words", () => {
  const events: UpEvent[] = [
    { type: "accepted", deployment: "d", cluster: "c", lane: "chat", t: 1 },
    { type: "say", text: "launcher: starting d", t: 2 },
    { type: "diagnostics", diagnostics: [{ severity: "warning", loc: { file: "r.toml", line: 3, col: 1 }, message: "w", hint: "h" }], t: 3 },
    { type: "node", node: "n1", state: { phase: "loading", figures: { weights_gib: "3.2" }, ready: false, lastLines: ["x"] }, t: 4 },
    { type: "done", t: 5 },
    { type: "result", outcome, t: 6 },
  ];
  for (const e of events) assert.deepEqual(decodeEvent(encodeEvent(e).trim()), e);
  assert.equal(decodeEvent("{\"type\":\"unheard-of\",\"t\":1}"), undefined);
  assert.equal(decodeEvent("not json"), undefined);
  const user = decodeError(encodeError(new UserError("bad", "fix it")));
  assert.ok(user instanceof UserError && user.hint === "fix it");
  const remote = decodeError(encodeError(new RemoteError("n1", "boot failed", "cause: x", "run a daemon")));
  assert.ok(remote instanceof RemoteError && remote.node === "n1" && remote.detail === "cause: x" && remote.hint === "run a daemon");
  const said: string[] = [];
  reportError(remote, (t) => said.push(t));
  assert.deepEqual(said, ["launcher: n1: boot failed", "  | cause: x", "  hint: run a daemon"]);
  const stopped = decodeError(encodeError(new Interrupted("launcher down", "no container was started")));
  assert.ok(stopped instanceof Interrupted && stopped.message === "interrupted (launcher down): no container was started");
});

test("registry: a follower sees the boot from its start; one boot per deployment and per lane; cancel rolls back", async () => {
  const registry = new BootRegistry(() => 0);
  let release = (): void => undefined;
  const entry = registry.start({ deployment: "d", cluster: "c", lane: "chat" }, gatedRun(new Promise((r) => (release = r))));
  assert.throws(() => registry.start({ deployment: "d", cluster: "c" }, gatedRun(Promise.resolve())), /busy: deployment d is being booted by this daemon/);
  assert.throws(() => registry.start({ deployment: "e", cluster: "c", lane: "chat" }, gatedRun(Promise.resolve())), /busy: lane chat/);
  await new Promise((r) => setImmediate(r));
  const seen: string[] = [];
  const unfollow = entry.follow((e) => seen.push(e.type));
  assert.deepEqual(seen, ["accepted", "note"]);
  unfollow();
  release();
  const final = await entry.ended;
  assert.equal(final.type, "result");
  assert.equal(entry.running, false);
  // Over: a new boot of the name may start, and cancelling it rolls it back.
  const again = registry.start({ deployment: "d", cluster: "c" }, gatedRun(new Promise(() => undefined)));
  assert.equal(registry.find("d"), again);
  const cancelled = await again.cancel("launcher down");
  assert.equal(cancelled.type, "error");
  assert.match(cancelled.type === "error" ? decodeError(cancelled.error).message : "", /interrupted \(launcher down\)/);
});

/**
 * Submits a boot and goes away once the daemon accepted it (a timer could go away before the
 * daemon had the boot); the events seen. A daemon that never accepts fails it after 10 s.
 */
async function submitAndDetach(target: DaemonTarget, ref: string): Promise<string[]> {
  const detach = new AbortController();
  const seen: string[] = [];
  await submitBoot(target, { ref }, (e) => {
    seen.push(e.type);
    if (e.type === "accepted") detach.abort();
  }, AbortSignal.any([detach.signal, AbortSignal.timeout(10_000)])).catch((e: unknown) => assert.ok(detach.signal.aborted, String(e)));
  return seen;
}

async function listen(handler: ReturnType<typeof controlApi>): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => void handler(req, res, (req.url ?? "/").split("?")[0] ?? "/"));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

test("control API: submit streams the boot; a client that goes away leaves it running; attach replays it; down cancels it", async () => {
  const registry = new BootRegistry(Date.now);
  let release = (): void => undefined;
  const gate = new Promise<void>((r) => (release = r));
  const handler = controlApi({
    ownerSocket: true,
    registry,
    submit: (s) => (s.ref === "broken" ? [{ type: "error", error: encodeError(new UserError("recipe broken has errors")), t: 1 }] : registry.start({ deployment: s.name ?? s.ref, cluster: "c" }, s.ref === "hold" ? gatedRun(new Promise(() => undefined)) : gatedRun(gate))),
    maxBodyBytes: 4096,
  });
  const { server, url } = await listen(handler);
  const target: DaemonTarget = { url };
  try {
    // The client detaches once accepted: the boot goes on.
    assert.deepEqual(await submitAndDetach(target, "d"), ["accepted"]);
    assert.equal(registry.find("d")?.running, true);
    // attach: from the start, to the end.
    const attached: string[] = [];
    // Released once attach has replayed the boot's note: the result then reaches it live, so this
    // shows attach following a boot still running (a timer could fire before attach connected).
    const following = followBoot(target, "d", (e) => {
      attached.push(e.type);
      if (e.type === "note") release();
    }, new AbortController().signal);
    await following;
    assert.deepEqual(attached, ["accepted", "note", "result"]);
    // A refusal before the start is its events, the error last.
    const refused: UpEvent[] = [];
    await submitBoot(target, { ref: "broken" }, (e) => refused.push(e), new AbortController().signal);
    assert.equal(refused.at(-1)?.type, "error");
    // down NAME cancels a boot in progress; nothing in progress: undefined (a plain down follows).
    assert.deepEqual(await submitAndDetach(target, "hold"), ["accepted"]);
    const final = await cancelBoot(target, "hold");
    assert.equal(final?.type, "error");
    assert.equal(await cancelBoot(target, "nothing"), undefined);
    // A malformed submission is refused as such.
    const bad = await fetch(`${url}${CONTROL_PATHS.boots}`, { method: "POST", body: JSON.stringify({ ref: "d", apiKey: "x" }) });
    assert.equal(bad.status, 400);
    const wrongMethod = await fetch(`${url}${CONTROL_PATHS.boot("d")}`, { method: "GET" });
    assert.equal(wrongMethod.status, 405);
  } finally {
    server.close();
    server.closeAllConnections();
  }
});

test("control API with an admin key: refused without it and with any other key (an inference key); never echoed", async () => {
  const registry = new BootRegistry(Date.now);
  const handler = controlApi({ checkAdmin: keyChecker(["admin-secret"]), registry, submit: () => [], maxBodyBytes: 4096 });
  const { server, url } = await listen(handler);
  try {
    for (const key of [undefined, "inference-key"]) {
      const res = await fetch(`${url}${CONTROL_PREFIX}boots`, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } });
      assert.equal(res.status, 401);
      assert.doesNotMatch(await res.text(), /inference-key|admin-secret/);
    }
    await assert.rejects(followBoot({ url, key: "inference-key" }, "d", () => undefined, new AbortController().signal), (e: unknown) => e instanceof UserError && /refused: missing or wrong admin key/.test(e.message) && !e.message.includes("inference-key"));
    const ok = await fetch(`${url}${CONTROL_PREFIX}boots`, { headers: { authorization: "Bearer admin-secret" } });
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { boots: [] });
  } finally {
    server.close();
  }
});

test("choosing the daemon: --daemon, then LAUNCHER_DAEMON (none: here), then this user's local daemon (through its socket, also when a URL names it)", () => {
  const local = { url: "http://127.0.0.1:8080", socket: "/run/user/1000/launcher-daemon/control-x.sock" };
  assert.deepEqual(chooseDaemon({ flag: "http://spark1:8080/", env: "http://other:1", local }), { url: "http://spark1:8080" });
  assert.deepEqual(chooseDaemon({ env: "http://other:1", local }), { url: "http://other:1" });
  assert.equal(chooseDaemon({ env: "none", local }), undefined);
  assert.deepEqual(chooseDaemon({ env: "", local }), local);
  assert.deepEqual(chooseDaemon({ flag: "http://127.0.0.1:8080/", local }), local, "the local daemon's own URL goes through its socket");
  assert.equal(chooseDaemon({}), undefined);
  assert.throws(() => chooseDaemon({ flag: "http://admin:secret@spark1:8080" }), (e: unknown) => e instanceof UserError && !e.message.includes("secret"));
  assert.throws(() => chooseDaemon({ flag: "spark1:8080" }), /must be an http:\/\/ or https:\/\/ URL/);
});

test("export systemd: every word quoted as systemd reads it back; % and $ literal; no key; a line break refused", () => {
  assert.equal(systemdWord('/opt/my launcher/"x"\\50%$HOME'), '"/opt/my launcher/\\"x\\"\\\\50%%$$HOME"');
  assert.throws(() => systemdWord("a\nExecStartPre=/bin/evil"), /line break/);
  const unit = daemonUnitText({ scope: "user", argv: ["/usr/bin/node", "/opt/l/dist/cli/main.js", "serve", "--control", "--admin-key-file", "/k/admin"], workingDirectory: "/srv/50%", environment: { XDG_STATE_HOME: "/s/$x" } });
  assert.match(unit, /^ExecStart="\/usr\/bin\/node" "\/opt\/l\/dist\/cli\/main.js" "serve" "--control" "--admin-key-file" "\/k\/admin"$/m);
  assert.match(unit, /^WorkingDirectory=\/srv\/50%%$/m);
  assert.match(unit, /^Environment="XDG_STATE_HOME=\/s\/\$x"$/m);
  assert.match(unit, /^WantedBy=default.target$/m);
  assert.doesNotMatch(unit, /^User=/m);
  assert.match(daemonUnitText({ scope: "system", argv: ["/n"], workingDirectory: "/", user: "ai", environment: {} }), /^User=ai\n[\s\S]*WantedBy=multi-user.target/m);
});

test("one renderer: a boot's events shown directly and after the wire print the same lines and answer", () => {
  const events: UpEvent[] = [
    { type: "accepted", deployment: "d", cluster: "c", lane: "chat", t: 1000 },
    { type: "say", text: "launcher: putting d in lane chat", t: 1001 },
    { type: "note", text: "preflight of d on n1 ...", t: 1200 },
    { type: "node", node: "n1", state: { phase: "loading", figures: {}, ready: false, lastLines: [] }, t: 2500 },
    { type: "done", t: 3000 },
    { type: "result", outcome, t: 3000 },
  ];
  const show = (list: readonly UpEvent[], json: boolean): string => {
    let text = "";
    const io = { out: (t: string) => (text += `out ${t}\n`), err: (t: string) => (text += `err ${t}\n`), warn: (t: string) => (text += `warn ${t}\n`), json: (v: unknown) => (text += `json ${JSON.stringify(v)}\n`), diagnostics: () => undefined };
    const stream = { isTTY: false, write: (t: string) => (text += `stream ${t}`), columns: 80, rows: 24, on: () => stream, off: () => stream, once: () => stream } as unknown as NodeJS.WriteStream;
    const view = new BootView(io, stream);
    for (const e of list) view.show(e);
    view.close();
    view.finish(json);
    return text;
  };
  const wire = events.map((e) => decodeEvent(encodeEvent(e).trim()) as UpEvent);
  for (const json of [false, true]) assert.equal(show(wire, json), show(events, json));
  assert.match(show(events, false), /stream \[ {2}1\.5s\] n1 +loading/);
  assert.match(show(events, false), /out d is ready in 1\.5 s: http:\/\/n1:8000\/v1 \(model "m"\); lane chat serves it\n$/);
});

test("progress events: one per change of a node's phase or figures, without its log lines", () => {
  const sent: UpEvent[] = [];
  const p = progressEvents((e) => sent.push(e), () => 1);
  const state = { phase: "loading" as const, figures: {}, ready: false, lastLines: ["a"] };
  p.node("n1", state);
  p.node("n1", { ...state, lastLines: ["a", "b"] });
  p.node("n1", { ...state, figures: { weights_gib: "3" }, lastLines: ["a", "b", "c"] });
  p.node("n2", state);
  assert.deepEqual(sent.map((e) => (e.type === "node" ? [e.node, e.state.figures, e.state.lastLines.length] : e.type)), [["n1", {}, 0], ["n1", { weights_gib: "3" }, 0], ["n2", {}, 0]]);
});

test("a connection lost mid-boot is a user error that says the boot goes on and how to follow it (not an internal error)", async () => {
  const server = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { "content-type": "application/x-ndjson" });
    res.write(encodeEvent({ type: "accepted", deployment: "d", cluster: "c", t: 1 }));
    setTimeout(() => res.socket?.destroy(), 50);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const target = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
  const io = { out: () => undefined, err: () => undefined, warn: () => undefined, json: () => undefined, diagnostics: () => undefined };
  try {
    await assert.rejects(
      watchBoot(target, io, false, false, (onEvent, signal) => submitBoot(target, { ref: "d" }, onEvent, signal)),
      (e: unknown) => e instanceof UserError && /^lost the connection to the daemon at http:\/\/127\.0\.0\.1:\d+ .*; the boot of d goes on there$/.test(e.message) && e.hint === "launcher attach d follows it, launcher down d cancels it",
    );
  } finally {
    server.close();
  }
});

test("a boot that says nothing for a while still sends an empty line now and then (the client's body timeout)", { timeout: 5000 }, async () => {
  const registry = new BootRegistry(Date.now);
  registry.start({ deployment: "quiet", cluster: "c" }, gatedRun(new Promise(() => undefined)));
  const { server, url } = await listen(controlApi({ ownerSocket: true, registry, submit: () => [], maxBodyBytes: 4096, heartbeatMs: 30 }));
  const stop = new AbortController();
  try {
    const res = await fetch(`${url}${CONTROL_PATHS.events("quiet")}`, { signal: stop.signal });
    let text = "";
    for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
      text += Buffer.from(chunk).toString();
      if (/\n\n$/.test(text)) break;
    }
    assert.match(text, /"type":"note".*\n\n$/s);
  } finally {
    stop.abort();
    await registry.list()[0]?.cancel("test");
    server.close();
    server.closeAllConnections();
  }
});

test("a daemon that stops cancels every boot still running and waits for their rollbacks", async () => {
  const registry = new BootRegistry(Date.now);
  const a = registry.start({ deployment: "a", cluster: "c" }, gatedRun(new Promise(() => undefined)));
  const b = registry.start({ deployment: "b", cluster: "c" }, gatedRun(new Promise(() => undefined)));
  await registry.cancelAll("launcher serve stopping");
  for (const entry of [a, b]) {
    assert.equal(entry.running, false);
    const final = entry.events.at(-1);
    assert.match(final?.type === "error" ? decodeError(final.error).message : "", /interrupted \(launcher serve stopping\)/);
  }
});
