import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import type { EvalRun } from "../../src/contract/evidence.js";
import { Store } from "../../src/store/store.js";
import { ARITH_ITEMS, wrongIdsAt } from "../support/arith-set.js";
import { launcher, launcherContainers, ok, practiceSuite, STATE_HOME, startGateway, variant } from "./practice-cluster.js";

// One host: eval talks to one head; a lane swap on the same node brings the second deployment.
const HOSTS = 1;
const dir = practiceSuite(HOSTS, "launcher-eval-it-");
const LANE = "evlane";
// At full speed: eval's time is the engine's answers, not a paced token rate.
const solo = (name: string, env = ""): string => variant(dir, name, "practice-2x", `required_nodes = 1\ntensor_parallel_size = 1\n[env]\nPRACTICE_TOKENS_PER_SEC = "0"\n${env}`);


function writeSet(name: string, lines: readonly string[]): string {
  const file = path.join(dir, name);
  writeFileSync(file, `${lines.join("\n")}\n`);
  return file;
}

/** The run `--json` printed, without the `warnings` every --json answer carries (src/app/output.ts). */
function evalRun(stdout: string): EvalRun {
  const { warnings, ...run } = JSON.parse(stdout) as EvalRun & { warnings: string[] };
  assert.deepEqual(warnings, []);
  return run;
}
const byGrade = (run: EvalRun): Record<string, string[]> => ({ right: run.items.filter((i) => i.correct).map((i) => i.id), wrong: run.items.filter((i) => !i.correct).map((i) => i.id) });

function storedRun(id: string): EvalRun | undefined {
  const store = new Store(path.join(STATE_HOME, "launcher", "launcher.db"));
  try {
    return store.evalRuns({ id })[0];
  } finally {
    store.close();
  }
}

describe("launcher eval on the practice cluster", { concurrency: false }, () => {
  const set = writeSet("arith.jsonl", ARITH_ITEMS.map((i) => JSON.stringify(i)));

  test("a bad set is refused line by line (file:line:col) before anything is sent", async () => {
    const bad = writeSet("bad.jsonl", [JSON.stringify(ARITH_ITEMS[0]), '{"prompt": "x", "expected": "1",}', '{"prompt": "x", "expected": "1", "grader": "choise"}']);
    const r = await launcher(["eval", "nothing-runs-this", "--set", bad]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /bad\.jsonl:2:\d+: error: not JSON/);
    assert.match(r.stderr, /bad\.jsonl:3:34: error: unknown grader "choise"\n {2}hint: did you mean "choice"\?/);
    assert.doesNotMatch(r.stderr, /nothing serves/, "the set is checked before the cluster is asked");
  });

  test("the score is exact on a set the practice engine answers; options reach the engine; each item is stored; the gateway gives the same", { timeout: 240_000 }, async () => {
    ok(await launcher(["up", solo("eval-right"), "--lane", LANE]), "up");
    const r = ok(await launcher(["eval", `lane/${LANE}`, "--set", set, "--chat-template-kwargs", '{"thinking":false}', "--reasoning-effort", "low", "--concurrency", "4", "--json"]), "eval --json");
    const run = evalRun(r.stdout);
    assert.deepEqual(byGrade(run), { right: ARITH_ITEMS.map((i) => i.id), wrong: [] });
    assert.equal(run.correct, ARITH_ITEMS.length);
    assert.equal(run.total, ARITH_ITEMS.length);
    assert.equal(run.temperature, 0);
    assert.deepEqual(run.request_options, { chat_template_kwargs: { thinking: false }, reasoning_effort: "low" });
    assert.equal(run.subject.deployment, "eval-right");
    assert.equal(run.subject.lane, LANE);
    assert.equal(run.items.find((i) => i.id === "c1")?.answer, "4 + 4 = 8.\nAnswer: B");
    assert.deepEqual(storedRun(run.id), run, "the run, every item's answer and grade, is in the store");
    assert.match(r.stderr, new RegExp(`eval: ${ARITH_ITEMS.length}/${ARITH_ITEMS.length} answered, ${ARITH_ITEMS.length} correct`));

    // thinking on: the engine puts a <think> block before the answer. Exact and anchored-regex
    // items now fail, contains and choice (which drops the block) still pass: the option arrived.
    const thinking = evalRun(ok(await launcher(["eval", "eval-right", "--set", set, "--chat-template-kwargs", '{"thinking":true}', "--json"]), "eval thinking").stdout);
    assert.deepEqual(byGrade(thinking), { right: ["has", "has2", "c1", "c2", "c3", "c4"], wrong: ["add", "mul", "sub", "add2", "re", "re2"] });

    const gateway = await startGateway();
    try {
      const human = ok(await launcher(["eval", LANE, "--set", set, "--gateway", gateway.url]), "eval through the gateway");
      // The cluster file (LAUNCHER_CLUSTER) tells what serves the lane: the run names the deployment.
      assert.match(human.stdout, new RegExp(`^${ARITH_ITEMS.length}/${ARITH_ITEMS.length} \\(100\\.0%\\) eval-right, temperature 0; run (\\S+)\\n$`));
      const viaGateway = storedRun(/; run (\S+)\n/.exec(human.stdout)?.[1] ?? "");
      assert.deepEqual(viaGateway?.subject, { ...run.subject, target: LANE });
    } finally {
      await gateway.stop();
    }
  });

  test("a second deployment in the lane that answers some items wrongly: exactly those are wrong, and the score says so", { timeout: 240_000 }, async () => {
    const share = 0.5;
    ok(await launcher(["up", solo("eval-wrong", `PRACTICE_WRONG_ANSWERS = "${share}"\n`), "--lane", LANE, "--drain", "1s"]), "up (lane swap)");
    const expectedWrong = wrongIdsAt(share);
    assert.ok(expectedWrong.length > 0 && expectedWrong.length < ARITH_ITEMS.length, `this set splits at ${share}: ${expectedWrong.join(", ")}`);
    const r = ok(await launcher(["eval", LANE, "--set", set]), "eval");
    const right = ARITH_ITEMS.length - expectedWrong.length;
    assert.match(r.stdout, new RegExp(`^${right}/${ARITH_ITEMS.length} \\(${((100 * right) / ARITH_ITEMS.length).toFixed(1)}%\\) eval-wrong, temperature 0; run (\\S+)\\n`));
    const id = /; run (\S+)\n/.exec(r.stdout)?.[1] ?? "";
    const stored = storedRun(id);
    assert.ok(stored);
    assert.deepEqual(byGrade(stored).wrong, expectedWrong);
    for (const w of expectedWrong) assert.match(r.stdout, new RegExp(`\\n {2}wrong {2}${w}: expected `), `${w} listed as wrong`);
    ok(await launcher(["down", `lane/${LANE}`, "--grace", "1"]), "down");
    assert.deepEqual(launcherContainers(HOSTS), []);
  });
});
