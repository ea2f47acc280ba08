import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { PROBE_ANSWER_BYTES, PROBE_PATH, probeBody } from "../../src/contract/generation.js";
import { curlGenerationProbe, pythonGenerationProbe, STATE_FILE, type GenerationProbe } from "../../src/engine/generation-probe.js";
import { generatedToken } from "../../src/supervise/generation-watch.js";
import { close, engine, json, run, TOKEN, type Answer, type Seen } from "./probe-engine.js";

// The generation probe programs that engines' images run as an exported leader's liveness
// (src/engine/generation-probe.ts), run here with this machine's python3 and curl against a Node
// server standing in for the engine.

const KEY = "sk-probe-test-0123456789";
const KEY_ENV = "PROBE_TEST_API_KEY";
const HOST_ENV = "PROBE_TEST_POD_IP";
const MODEL = "qwen3-32b";

const PROGRAMS: readonly (readonly [string, GenerationProbe])[] = [
  ["python3 (vLLM, SGLang)", pythonGenerationProbe],
  ["sh and curl (llama.cpp)", curlGenerationProbe],
];

/** A short bound for the tests (the export's is launcher serve's --probe-bound). */
const BOUND_S = 2;

for (const [name, program] of PROGRAMS) {
  const probe = (port: number, key = true, bound = BOUND_S): readonly string[] => program({ hostEnv: HOST_ENV, port, ...(key ? { keyEnv: KEY_ENV } : {}), servedModel: MODEL, boundSeconds: bound });
  const env = { [HOST_ENV]: "127.0.0.1", [KEY_ENV]: KEY };

  test(`${name}: a 200 with a token passes; the request is the daemon's, the key arrives as its Authorization header and is on no argv`, async () => {
    const e = await engine(json(200, TOKEN));
    try {
      const r = await run(probe(e.port), env, 20_000);
      assert.equal(r.code, 0, r.out);
      assert.equal(e.seen.length, 1);
      const [seen] = e.seen;
      assert.deepEqual(seen, { method: "POST", url: PROBE_PATH, authorization: `Bearer ${KEY}`, body: probeBody(MODEL) });
      assert.ok(!r.argv.some((w) => w.includes(KEY)), "the key is read from the env, never passed");
    } finally {
      await close(e.server);
    }
  });

  test(`${name}: no key env given, or the env empty: no Authorization header`, async () => {
    const e = await engine(json(200, TOKEN));
    try {
      assert.equal((await run(probe(e.port, false), env, 20_000)).code, 0);
      assert.equal((await run(probe(e.port), { [HOST_ENV]: "127.0.0.1" }, 20_000)).code, 0);
      assert.deepEqual(e.seen.map((s) => s.authorization), [undefined, undefined]);
    } finally {
      await close(e.server);
    }
  });

  test(`${name}: an engine that never answers fails the probe within its bound, by the program's own timer`, async () => {
    const e = await engine(() => {});
    try {
      const r = await run(probe(e.port), env, (BOUND_S + 15) * 1000);
      assert.equal(r.signal, null, `it ended itself, not the test's kill: ${r.out}`);
      assert.notEqual(r.code, 0, r.out);
      assert.match(r.out, /^launcher generation probe: (no token within 2 s|.*\(tried for 2 s\))$/m);
      // The bound, with room for a loaded machine's process start: never the kill's 17 s.
      assert.ok(r.ms < (BOUND_S + 5) * 1000, `${r.ms} ms`);
    } finally {
      await close(e.server);
    }
  });

  test(`${name}: a quick failure is tried again within the bound (a 503, then a token)`, async () => {
    const e = await engine((res, n, one) => (n === 1 ? json(503, "busy") : json(200, TOKEN))(res, n, one));
    try {
      // A bound with room for the pause (PROBE_RETRY_MS) on a busy machine: the shell program
      // counts whole seconds (date +%s), so a 2 s bound can leave less than its 1 s pause.
      const r = await run(probe(e.port, true, 6), env, 20_000);
      assert.equal(r.code, 0, r.out);
      assert.equal(e.seen.length, 2);
    } finally {
      await close(e.server);
    }
  });

  test(`${name}: a refused request (4xx) passes, as the daemon learns nothing of generation from it; an error status, no token or a long answer fail`, async () => {
    const cases: readonly [string, Answer, RegExp | undefined][] = [
      ["401", json(401, { error: "bad key" }), undefined],
      ["500", json(500, "boom"), /answered HTTP 500 \(tried for 1 s\)$/m],
      ["no token", json(200, { choices: [{ text: "" }], usage: { completion_tokens: 0 } }), /answered with no token \(tried for 1 s\)$/m],
      ["too long", json(200, { ...TOKEN, pad: "x".repeat(PROBE_ANSWER_BYTES) }), new RegExp(`its answer passed ${PROBE_ANSWER_BYTES} bytes \\(tried for 1 s\\)$`, "m")],
    ];
    for (const [what, answer, fails] of cases) {
      const passes = fails === undefined;
      const e = await engine(answer);
      try {
        // A passing case ends at its first answer; a failing one is tried again while its bound
        // lasts, so a short bound keeps the case quick.
        const r = await run(probe(e.port, true, passes ? 3 : 1), env, 20_000);
        assert.equal(r.code === 0, passes, `${what}: ${r.out}`);
        if (fails !== undefined) {
          assert.equal(r.signal, null, `${what}: it ended itself`);
          assert.match(r.out, fails, what);
          assert.ok(e.seen.length >= 1, `${what}: asked`);
        }
      } finally {
        await close(e.server);
      }
    }
  });

  test(`${name}: a token counter risen since the last run is generation (no probe), the probe's own token is not, and a missing counter changes nothing`, async () => {
    // The engine's counter: each probe adds its one token; "traffic" adds more between runs.
    let tokens = 7;
    const counter = "engine:generation_tokens_total";
    const page = (): string => `# HELP other\nengine:other_total 99\n${counter}{model_name="m a",engine="0"} ${tokens / 2}\n${counter}{engine="1"} ${tokens / 2}\n`;
    const e = await engine((res, n, one: Seen) => {
      if (one.method === "GET") return (res.writeHead(200, { "content-type": "text/plain" }), res.end(page()));
      tokens += 1;
      return json(200, TOKEN)(res, n, one);
    });
    const dir = mkdtempSync(path.join(tmpdir(), "probe-state-"));
    try {
      const argv = program({ hostEnv: HOST_ENV, port: e.port, keyEnv: KEY_ENV, servedModel: MODEL, boundSeconds: BOUND_S, counter: { path: "/metrics", names: ["engine:missing_total", counter] } }).map((w) => (w === STATE_FILE ? path.join(dir, "state-") : w));
      const posts = (): number => e.seen.filter((s) => s.method === "POST").length;
      assert.equal((await run(argv, env, 20_000)).code, 0);
      assert.equal(posts(), 1, "no counter kept yet: a probe");
      assert.equal(Number(readFileSync(path.join(dir, `state-${e.port}`), "utf8")), 8, "the counter read after the probe's token, summed over its series");
      const second = await run(argv, env, 20_000);
      assert.equal(second.code, 0, second.out);
      assert.equal(posts(), 2, "only the probe's own token since: a probe again");
      tokens += 40;
      const busy = await run(argv, env, 20_000);
      assert.equal(busy.code, 0, busy.out);
      assert.equal(posts(), 2, "traffic generated: no probe");
      assert.match(busy.out, /since the last run: no probe/);
      // No counter on the page: a probe, as without one.
      const bare = program({ hostEnv: HOST_ENV, port: e.port, servedModel: MODEL, boundSeconds: BOUND_S, counter: { path: "/nothing", names: ["engine:missing_total"] } }).map((w) => (w === STATE_FILE ? path.join(dir, "bare-") : w));
      assert.equal((await run(bare, env, 20_000)).code, 0);
      assert.equal(posts(), 3);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await close(e.server);
    }
  });

  test(`${name}: an answer is a token as the daemon's generatedToken says`, async () => {
    const bodies = [
      JSON.stringify({ choices: [{ text: "" }], usage: { completion_tokens: 1 } }),
      JSON.stringify({ choices: [{ text: "x" }], usage: { completion_tokens: 0 } }),
      JSON.stringify({ choices: [{ text: "x" }] }),
      JSON.stringify({ choices: [{ text: "" }] }),
      JSON.stringify({ choices: [] }),
      "not json",
    ];
    for (const body of bodies) {
      const e = await engine(json(200, body));
      try {
        const r = await run(program({ hostEnv: HOST_ENV, port: e.port, servedModel: MODEL, boundSeconds: 1 }), env, 20_000);
        assert.equal(r.code === 0, generatedToken(body), `${body}: ${r.out}`);
      } finally {
        await close(e.server);
      }
    }
  });
}

test("sh and curl (llama.cpp): a second that turns before the first try still leaves it one try (date counts whole seconds)", async () => {
  const e = await engine(json(200, TOKEN));
  const dir = mkdtempSync(path.join(tmpdir(), "probe-date-"));
  try {
    // A date ahead of the real one on PATH whose first reading is second 1000 and every later one
    // 1001: a 1 s bound is spent by the time the program first reads what is left of it.
    writeFileSync(path.join(dir, "date"), `#!/bin/sh\nif [ -e "${dir}/read" ]; then echo 1001; else : > "${dir}/read"; echo 1000; fi\n`);
    chmodSync(path.join(dir, "date"), 0o755);
    const argv = curlGenerationProbe({ hostEnv: HOST_ENV, port: e.port, servedModel: MODEL, boundSeconds: 1 });
    const r = await run(argv, { PATH: `${dir}:${process.env.PATH ?? ""}`, [HOST_ENV]: "127.0.0.1" }, 20_000);
    assert.ok(existsSync(path.join(dir, "read")), "the program read this date");
    assert.equal(r.code, 0, r.out);
    assert.equal(e.seen.length, 1, "one try");
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await close(e.server);
  }
});

test("sh and curl (llama.cpp): the key reaches curl on its stdin, never on curl's own argv", async () => {
  const e = await engine(json(200, TOKEN));
  const dir = mkdtempSync(path.join(tmpdir(), "probe-curl-"));
  try {
    // A curl ahead of the real one on PATH that writes down its argv, then is the real curl.
    const real = (process.env.PATH ?? "").split(":").map((d) => path.join(d, "curl")).find((f) => { try { return readFileSync(f).length > 0; } catch { return false; } });
    assert.ok(real, "curl on PATH");
    writeFileSync(path.join(dir, "curl"), `#!/bin/sh\nprintf '%s\\n' "$@" > "${dir}/argv"\nexec "${real}" "$@"\n`);
    chmodSync(path.join(dir, "curl"), 0o755);
    const argv = curlGenerationProbe({ hostEnv: HOST_ENV, port: e.port, keyEnv: KEY_ENV, servedModel: MODEL, boundSeconds: BOUND_S });
    const r = await run(argv, { PATH: `${dir}:${process.env.PATH ?? ""}`, [HOST_ENV]: "127.0.0.1", [KEY_ENV]: KEY }, 20_000);
    assert.equal(r.code, 0, r.out);
    const curlArgv = readFileSync(path.join(dir, "argv"), "utf8");
    assert.match(curlArgv, /^-H\n@-$/m, "the headers from stdin");
    assert.ok(!curlArgv.includes(KEY), curlArgv);
    assert.equal(e.seen[0]?.authorization, `Bearer ${KEY}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await close(e.server);
  }
});
