import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request, type IncomingHttpHeaders, type Server } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { collectKeys, keyChecker, parseKeyFile, presentedKey } from "../../src/gateway/auth.js";
import { MAX_JSON_DEPTH, readRequestBody } from "../../src/gateway/body.js";
import { scanJson } from "../../src/gateway/json-scan.js";
import { Discovery } from "../../src/daemon/discovery.js";
import { allowedMethods, GATEWAY_METHODS } from "../../src/gateway/methods.js";
import { routeTable, type RouteTable } from "../../src/gateway/routes.js";
import { createGateway, type GatewayOptions } from "../../src/gateway/server.js";
import { deployment, gatewayOptions } from "./gateway-fixture.js";
import { UserError } from "../../src/config/errors.js";
import { within } from "../integration/practice-cluster.js";
import { cliArgs } from "../built-cli.js";

const dir = mkdtempSync(path.join(tmpdir(), "launcher-gw-hard-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const nested = (depth: number): string => `{"model":"main","messages":[{"role":"user","content":"hi"}],"x":${"[".repeat(depth)}${"]".repeat(depth)}}`;

// ---------------------------------------------------------------- keys (pure)

test("keys: an empty or blank --api-key is a user error naming the likely unset variable, never a key", () => {
  for (const k of ["", "   ", "\t"]) {
    assert.throws(() => collectKeys({ flags: ["good", k], env: undefined }), (e: unknown) => e instanceof UserError && /--api-key was given an empty key \(probably an unset variable/.test(e.message));
  }
  assert.deepEqual(collectKeys({ flags: [" k1 "], env: undefined }), ["k1"]);
});

test("keys: $LAUNCHER_API_KEY skips blank entries, and one that holds no key at all is a user error", () => {
  assert.deepEqual(collectKeys({ flags: [], env: "a, ,b,," }), ["a", "b"]);
  for (const env of ["", " ", " , ,"]) assert.throws(() => collectKeys({ flags: [], env }), /LAUNCHER_API_KEY is set but holds no key/);
  assert.deepEqual(collectKeys({ flags: [], env: undefined }), [], "unset: no key (loopback only, checked by serve)");
});

test("keys: key-file lines that are blank or whitespace are skipped; a file of only those is a user error", () => {
  assert.deepEqual(parseKeyFile("# keys\nk1\n   \n\t\n  k2  \r\n"), ["k1", "k2"]);
  assert.throws(() => collectKeys({ flags: [], env: undefined, file: { path: "/k", text: "  \n\t\n# only a comment\n" } }), /the API key file \/k holds no key/);
});

test("keys: keyChecker refuses a blank configured key, and a blank presented key never matches", () => {
  assert.throws(() => keyChecker(["k1", ""]), /blank/);
  assert.throws(() => keyChecker([" "]), /blank/);
  const check = keyChecker(["k1"]);
  for (const p of ["", " ", undefined]) assert.equal(check(p), false, JSON.stringify(p));
  assert.equal(check("k1"), true);
  // What an empty header gives: `Authorization: Bearer ` (Node trims it to "Bearer"), `x-api-key:`.
  assert.equal(presentedKey("Bearer", ""), "");
  assert.equal(presentedKey("Bearer   ", undefined), undefined);
  assert.equal(check(presentedKey("Bearer", "")), false);
  assert.equal(presentedKey(undefined, " k1 "), "k1");
});

const cli = (args: string[], env: Record<string, string> = {}) => {
  const r = spawnSync(process.execPath, [...cliArgs(), ...args], { encoding: "utf8", timeout: 30_000, env: { ...process.env, NODE_OPTIONS: "", LAUNCHER_CLUSTER: path.join(dir, "no-cluster.toml"), ...env } });
  return { code: r.status, stderr: r.stderr };
};

test("serve: --api-key \"\" (an unset variable) stops at start with exit 1; so does a LAUNCHER_API_KEY of no key", () => {
  const empty = cli(["serve", "--listen", "127.0.0.1:0", "--api-key", ""]);
  assert.equal(empty.code, 1, empty.stderr);
  assert.match(empty.stderr, /--api-key was given an empty key \(probably an unset variable/);
  assert.doesNotMatch(empty.stderr, /\n\s+at /);
  const env = cli(["serve", "--listen", "0.0.0.0:0"], { LAUNCHER_API_KEY: " , " });
  assert.equal(env.code, 1, env.stderr);
  assert.match(env.stderr, /LAUNCHER_API_KEY is set but holds no key/);
});

// ---------------------------------------------------------------- bodies and methods (pure)

test("depth scan: counts nesting outside strings, stops at the first level too deep", () => {
  const jsonDepthExceeds = (b: Uint8Array, max: number): boolean => scanJson(b, max).kind === "too-deep";
  assert.equal(jsonDepthExceeds(Buffer.from(nested(10)), 11), false, "the object itself is one level");
  assert.equal(jsonDepthExceeds(Buffer.from(nested(10)), 10), true);
  assert.equal(jsonDepthExceeds(Buffer.from(`{"s":"${"[".repeat(500)}","t":"\\"[[[[{{{{"}`), 1), false, "brackets inside strings, escaped quotes");
  assert.equal(jsonDepthExceeds(Buffer.from("[[],[]]"), 2), false, "siblings do not add up");
  assert.equal(jsonDepthExceeds(Buffer.from(`{"é":"ü","a":[[["\\\\"]]]}`), 3), true, "UTF-8 and an escaped backslash");
  assert.equal(jsonDepthExceeds(Buffer.from("[".repeat(1_000_000)), MAX_JSON_DEPTH), true, "a million levels: no recursion to overflow");
});

test("request bodies: JSON whatever the Content-Type, forms untouched, too deep and invalid are refused", () => {
  for (const type of [undefined, "", "text/plain", "application/json; charset=utf-8", "application/octet-stream"]) {
    assert.deepEqual(readRequestBody(Buffer.from('{"model":"m"}'), type), { kind: "json", model: { start: 9, end: 12, name: "m", tooLong: false } }, String(type));
  }
  assert.deepEqual(readRequestBody(Buffer.from("--b\r\n[[[[["), "multipart/form-data; boundary=b", 2), { kind: "raw" });
  assert.deepEqual(readRequestBody(Buffer.alloc(0), "application/json"), { kind: "raw" });
  const deep = readRequestBody(Buffer.from(nested(MAX_JSON_DEPTH)), undefined);
  assert.equal(deep.kind === "invalid" && deep.code, "json_too_deep");
  assert.equal(readRequestBody(Buffer.from(nested(MAX_JSON_DEPTH - 2)), undefined).kind, "json", "up to the limit is fine");
  const bad = readRequestBody(Buffer.from("{nope"), "text/plain");
  assert.equal(bad.kind === "invalid" && bad.code, "invalid_json");
});

test("methods: the gateway's own routes, the engine's table (path parameters), nothing for unknown paths", () => {
  const tables = [GATEWAY_METHODS, vllm.apiMethods];
  assert.deepEqual(allowedMethods(tables, "/v1/chat/completions"), ["POST"]);
  assert.deepEqual(allowedMethods(tables, "/v1/models"), ["GET", "HEAD"]);
  assert.deepEqual(allowedMethods(tables, "/v1/models/some-model"), ["GET", "HEAD"]);
  assert.equal(allowedMethods(tables, "/v1/models//x"), undefined, "a parameter is never empty");
  assert.equal(allowedMethods(tables, "/v1/responses/resp_1"), undefined, "by id: never forwarded");
  assert.equal(allowedMethods(tables, "/v1/something-new"), undefined);
  assert.deepEqual(allowedMethods(tables, "/health"), ["GET", "HEAD"]);
});

// ---------------------------------------------------------------- the gateway over real HTTP

interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** A stand-in for an engine (not the practice engine): records requests; streams slowly when asked. */
async function standInEngine(): Promise<{ url: string; seen: Seen[]; server: Server }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      if (body.includes('"stream":true')) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        let n = 0;
        const timer = setInterval(() => {
          if (++n <= 8) res.write(`data: {"n":${n}}\n\n`);
          else {
            clearInterval(timer);
            res.end("data: [DONE]\n\n");
          }
        }, 300);
        res.on("close", () => clearInterval(timer));
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: true }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server };
}


async function startGateway(over: Partial<GatewayOptions> & { routes: () => RouteTable }): Promise<{ url: string; close: () => Promise<void> }> {
  const gw = createGateway(gatewayOptions({ health: () => ({ deployments: 1, unreachable: ["c/n2"] }), requestTimeoutMs: 1000, ...over }));
  await new Promise<void>((r) => gw.server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(gw.server.address() as AddressInfo).port}`,
    close: async () => {
      gw.server.closeAllConnections();
      await new Promise<void>((r) => gw.server.close(() => r()));
      await gw.close();
    },
  };
}

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** One request with exactly these headers (fetch would add a Content-Type of its own). */
function call(url: string, method: string, pathname: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${pathname}`, { method, headers: body === undefined ? headers : { ...headers, "content-length": String(Buffer.byteLength(body)) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.setTimeout(20_000, () => req.destroy(new Error("no answer in 20 s")));
    req.end(body);
  });
}

const errorOf = (a: Answer): { code: string; message: string; type: string } => (JSON.parse(a.body) as { error: { code: string; message: string; type: string } }).error;

async function withGateway(over: Partial<GatewayOptions>, run: (gw: string, engine: { url: string; seen: Seen[] }) => Promise<void>): Promise<void> {
  const engine = await standInEngine();
  const table = routeTable([deployment(engine.url)], [{ name: "main", cluster: "c", state: "serving", since: "t", deployment: "practice-2x" }]);
  const gw = await startGateway({ routes: () => table, ...over });
  try {
    await run(gw.url, engine);
  } finally {
    await gw.close();
    engine.server.closeAllConnections();
    engine.server.close();
  }
}

test("HTTP: a body nested thousands deep is a 400 in OpenAI's shape (lane alias or not), never 500, never forwarded", async () => {
  await withGateway({}, async (gw, engine) => {
    for (const body of [nested(5000), nested(5000).replace('"main"', '"practice"'), nested(200)]) {
      const a = await call(gw, "POST", "/v1/chat/completions", { "content-type": "application/json" }, body);
      assert.equal(a.status, 400, a.body);
      assert.deepEqual(errorOf(a), { message: `the request body nests deeper than ${MAX_JSON_DEPTH} levels`, type: "invalid_request_error", code: "json_too_deep", param: null });
    }
    assert.equal(engine.seen.length, 0);
  });
});

test("HTTP: a JSON body without Content-Type is routed and its lane alias rewritten; the engine gets application/json", async () => {
  await withGateway({}, async (gw, engine) => {
    for (const headers of [{}, { "content-type": "text/plain" }]) {
      const a = await call(gw, "POST", "/v1/chat/completions", headers, '{"model":"main","messages":[]}');
      assert.equal(a.status, 200, a.body);
      const got = engine.seen.at(-1);
      assert.deepEqual(JSON.parse(got?.body ?? "null"), { model: "practice", messages: [] });
      assert.equal(got?.headers["content-type"], "application/json");
    }
    const invalid = await call(gw, "POST", "/v1/chat/completions", {}, "{not json");
    assert.equal(invalid.status, 400);
    assert.equal(errorOf(invalid).code, "invalid_json");
    const form = await call(gw, "POST", "/v1/audio/transcriptions", { "content-type": "multipart/form-data; boundary=b" }, "--b\r\n[[[\r\n--b--");
    assert.equal(form.status, 200, "a form goes through untouched (one deployment: no model needed)");
    assert.equal(engine.seen.at(-1)?.body, "--b\r\n[[[\r\n--b--");
  });
});

test("HTTP: 405 with Allow where a route takes only POST or only GET; unknown /v1 paths are 404, never forwarded", async () => {
  await withGateway({}, async (gw, engine) => {
    const cases: [string, string, string][] = [
      ["GET", "/v1/chat/completions", "POST"],
      ["PUT", "/v1/embeddings", "POST"],
      ["DELETE", "/v1/models", "GET, HEAD"],
      ["POST", "/v1/models/practice", "GET, HEAD"],
      ["GET", "/v1/responses", "POST"],
      ["POST", "/health", "GET, HEAD"],
    ];
    for (const [method, p, allow] of cases) {
      const a = await call(gw, method, p, { "content-type": "application/json" }, '{"model":"main"}');
      assert.equal(a.status, 405, `${method} ${p}: ${a.body}`);
      assert.equal(a.headers.allow, allow);
      assert.equal(errorOf(a).code, "method_not_allowed");
    }
    for (const method of ["GET", "POST", "PATCH"]) {
      const a = await call(gw, method, "/v1/something-new", {}, '{"model":"main"}');
      assert.equal(a.status, 404, a.body);
      assert.equal(errorOf(a).code, "not_found");
    }
    assert.equal(engine.seen.length, 0, "nothing forwarded");
  });
});

test("HTTP: a body that trickles is cut with 408 after the request timeout; a streamed answer longer than it is not", async () => {
  await withGateway({ requestTimeoutMs: 1000 }, async (gw, engine) => {
    const { port } = new URL(gw);
    const started = Date.now();
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), "127.0.0.1", () => socket.write('POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{"model"'));
      let got = "";
      socket.on("data", (c: Buffer) => (got += c.toString("utf8")));
      socket.on("close", () => resolve(got));
      socket.on("error", reject);
      setTimeout(() => socket.destroy(new Error(`no answer in 10 s; got ${JSON.stringify(got)}`)), 10_000).unref();
    });
    assert.match(answer, /^HTTP\/1\.1 408 /);
    assert.match(answer, /"code":"request_timeout"/);
    assert.ok(Date.now() - started < 5000, `cut after ${Date.now() - started} ms`);
    assert.equal(engine.seen.length, 0);

    // 8 chunks 300 ms apart: 2.4 s of answer, over twice the request timeout.
    const stream = await call(gw, "POST", "/v1/chat/completions", { "content-type": "application/json" }, '{"model":"main","stream":true}');
    assert.equal(stream.status, 200);
    assert.equal(stream.body.split("\n\n").filter((e) => e.startsWith("data: ")).length, 9, stream.body);
    assert.ok(stream.body.endsWith("data: [DONE]\n\n"));
  });
});

test("HTTP: /health without a key says only the status; with the key, or with no keys configured, the detail", async () => {
  const key = "sk-hardening-1";
  await withGateway({ checkKey: keyChecker([key]) }, async (gw) => {
    for (const headers of [{}, { authorization: "Bearer wrong" }, { "x-api-key": "" }, { authorization: "Bearer " }]) {
      const a = await call(gw, "GET", "/health", headers);
      assert.equal(a.status, 200);
      assert.deepEqual(JSON.parse(a.body), { status: "ok" }, JSON.stringify(headers));
      assert.equal((await call(gw, "GET", "/v1/models", headers)).status, 401, "an empty or wrong key opens nothing");
    }
    const full = JSON.parse((await call(gw, "GET", "/health", { authorization: `Bearer ${key}` })).body) as Record<string, unknown>;
    assert.deepEqual(full, { status: "ok", in_flight: 0, deployments: 1, unreachable: ["c/n2"] });
  });
  await withGateway({}, async (gw) => {
    assert.deepEqual(JSON.parse((await call(gw, "GET", "/health")).body), { status: "ok", in_flight: 0, deployments: 1, unreachable: ["c/n2"] });
  });
});

// ---------------------------------------------------------------- stale discovery, with a real stalled watcher

test("stale discovery: a watcher that stalls is noticed (/health 503 stale, errors say how old), logged once, and restarted", async () => {
  const starts = path.join(dir, "starts");
  writeFileSync(starts, "");
  const booting = deployment("http://127.0.0.1:9", { deployment: "slow", served_model: "slow", status: "booting", phase: "loading" });
  delete (booting as { lane?: string }).lane;
  const { cluster: _c, ...status } = booting;
  const poll = JSON.stringify({ deployments: [status], unreachable: [], at: new Date().toISOString() });
  // A stand-in for `launcher status --watch`: the first one prints one poll, then it and every
  // later one stay alive and silent (a hung ssh).
  const script = `const fs=require("fs");fs.appendFileSync(${JSON.stringify(starts)},"x");if(fs.readFileSync(${JSON.stringify(starts)},"utf8").length===1)process.stdout.write(${JSON.stringify(poll + "\n")});setInterval(()=>{},1e9);`;
  const log: string[] = [];
  const discovery = new Discovery([{ cluster: "c", argv: [process.execPath, "-e", script] }], (l) => log.push(l), 1500);
  discovery.start();
  const gw = await startGateway({ routes: () => routeTable(discovery.snapshot().deployments, []), staleness: () => discovery.staleness(), checkKey: keyChecker(["k"]) });
  try {
    await discovery.ready(10_000);
    assert.equal(discovery.staleness(), undefined, "fresh right after the first poll");
    assert.deepEqual(JSON.parse((await call(gw.url, "GET", "/health")).body), { status: "ok" });

    const health = await within(10_000, "/health turns stale", async () => {
      const a = await call(gw.url, "GET", "/health");
      return a.status === 503 ? (JSON.parse(a.body) as { status: string; discovery_age_seconds: number }) : undefined;
    });
    assert.equal(health.value.status, "stale");
    assert.deepEqual(Object.keys(health.value).sort(), ["discovery_age_seconds", "status"], "nothing more without a key");
    assert.ok(health.value.discovery_age_seconds >= 1);

    const auth = { authorization: "Bearer k" };
    const detail = JSON.parse((await call(gw.url, "GET", "/health", auth)).body) as { stale_clusters: string[] };
    assert.deepEqual(detail.stale_clusters, ["c"]);
    const unknown = await call(gw.url, "POST", "/v1/chat/completions", auth, '{"model":"nope"}');
    assert.equal(unknown.status, 404);
    assert.match(errorOf(unknown).message, /known models: slow \(the gateway's view of the clusters is \d+ s old: discovery of c is not answering\)/);
    const boot = await call(gw.url, "POST", "/v1/chat/completions", auth, '{"model":"slow"}');
    assert.equal(boot.status, 503);
    assert.match(errorOf(boot).message, /is booting: phase loading \(the gateway's view of the clusters is \d+ s old/);

    await within(15_000, "the stalled watcher is killed and a new one started", async () => (readFileSync(starts, "utf8").length >= 2 ? true : undefined));
    assert.ok(log.some((l) => /^discovery of c: its watcher \(pid \d+\) printed nothing for \d+ s; stopping it to start a new one$/.test(l)), log.join("\n"));
    assert.ok(log.some((l) => /^discovery of c stopped \(exit null\); restarting in 1 s$/.test(l)), log.join("\n"));
    assert.equal(log.filter((l) => l.includes("is stale")).length, 1, `logged once:\n${log.join("\n")}`);
    assert.notEqual(discovery.staleness(), undefined, "still stale: the new watcher has said nothing either");
  } finally {
    await gw.close();
    await discovery.stop();
  }
});

test("HTTP: the engine gets the deployment's own API key, never the client's key to the gateway", async () => {
  const seenKeys: string[] = [];
  await withGateway(
    {
      checkKey: (k) => k === "gateway-key",
      engineKey: (t) => {
        seenKeys.push(`${t.cluster}/${t.deployment}`);
        return "engine-secret";
      },
    },
    async (gw, engine) => {
      const a = await call(gw, "POST", "/v1/chat/completions", { "content-type": "application/json", authorization: "Bearer gateway-key" }, '{"model":"main","messages":[]}');
      assert.equal(a.status, 200, a.body);
      assert.equal(engine.seen.at(-1)?.headers.authorization, "Bearer engine-secret");
      assert.deepEqual(seenKeys, ["c/practice-2x"]);
    },
  );
  await withGateway({ checkKey: (k) => k === "gateway-key" }, async (gw, engine) => {
    const a = await call(gw, "POST", "/v1/chat/completions", { "content-type": "application/json", authorization: "Bearer gateway-key" }, '{"model":"main","messages":[]}');
    assert.equal(a.status, 200, a.body);
    assert.equal(engine.seen.at(-1)?.headers.authorization, undefined, "no engine key: the client's key is not passed on");
  });
});
