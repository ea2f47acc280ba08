import assert from "node:assert/strict";
import { test } from "node:test";
import { Store } from "../../src/store/store.js";
import { findSide, resolveSides } from "../../src/measure/compare/resolve.js";
import type { BenchRun, EvalRun } from "../../src/contract/evidence.js";
import { evalRun, series } from "./compare-fixture.js";

const cfg = { rate: 50, ttftMs: 50, noise: 0.03 };

/** A series on a deployment of a recipe, reached through a target, started at `hour`. */
function stored(name: string, deployment: string, recipe: string, target: string, hour: number): BenchRun[] {
  return series(name, cfg, 2, hour).map((r, i) => ({
    ...r,
    started_at: `2026-12-03T${String(hour).padStart(2, "0")}:0${i}:00.000Z`,
    subject: { ...r.subject, deployment, recipe, target },
  }));
}

function evalOn(id: string, deployment: string, hour: number, sha = "a"): EvalRun {
  const e = evalRun(id, 10, (i) => i < 7);
  return { ...e, started_at: `2026-12-03T${String(hour).padStart(2, "0")}:30:00.000Z`, subject: { target: "chat", deployment, recipe: "r1" }, set: { ...e.set, sha256: sha.repeat(64) } };
}

function store(): Store {
  const s = new Store(":memory:");
  for (const r of [...stored("old", "dep1", "r1", "chat", 1), ...stored("new", "dep1", "r1", "chat", 2), ...stored("other", "dep2", "r2", "dep2", 3)]) s.saveBenchRun(r);
  s.saveEvalRun(evalOn("e-old", "dep1", 1));
  s.saveEvalRun(evalOn("e-new", "dep1", 2, "b"));
  s.saveEvalRun(evalOn("e-dep2-a", "dep2", 3, "a"));
  s.saveEvalRun(evalOn("e-dep2-b", "dep2", 4, "b"));
  return s;
}

const seriesOf = (runs: readonly BenchRun[]): string[] => [...new Set(runs.map((r) => r.series))];

test("a side named by series, run id, deployment, lane or recipe is its newest series (all runs, in order) and its evals", () => {
  const s = store();
  try {
    const bySeries = findSide(s, "old");
    assert.deepEqual([bySeries.kind, seriesOf(bySeries.bench), bySeries.bench.map((r) => r.run)], ["series", ["old"], [1, 2]]);
    assert.equal(bySeries.evals[0]?.id, "e-new", "a series brings its deployment's newest eval");
    assert.deepEqual(seriesOf(findSide(s, "old-run2").bench), ["old"]);
    const byEval = findSide(s, "e-old");
    assert.deepEqual([byEval.kind, byEval.evals.map((e) => e.id), seriesOf(byEval.bench)], ["run", ["e-old"], ["new"]]);
    assert.deepEqual(seriesOf(findSide(s, "dep1").bench), ["new"]);
    assert.deepEqual([findSide(s, "chat").kind, seriesOf(findSide(s, "chat").bench)], ["lane", ["new"]]);
    assert.deepEqual(seriesOf(findSide(s, "r2").bench), ["other"]);
  } finally {
    s.close();
  }
});

test("a KIND/ prefix picks the kind when a name is both a deployment and a lane", () => {
  const s = store();
  try {
    assert.equal(findSide(s, "dep2").kind, "deployment");
    assert.equal(findSide(s, "lane/dep2").kind, "lane");
    assert.throws(() => findSide(s, "lane/dep1"), /no stored bench or eval run for lane\/dep1/);
  } finally {
    s.close();
  }
});

test("B's eval is its newest on A's question set, so answers are compared on the same items", () => {
  const s = store();
  try {
    const [a, b] = resolveSides(s, "e-old", "dep2");
    assert.equal(a.eval?.id, "e-old");
    assert.equal(b.eval?.id, "e-dep2-a", "the newest of dep2 (e-dep2-b) is on another set");
    const [, b2] = resolveSides(s, "dep1", "dep2");
    assert.equal(b2.eval?.id, "e-dep2-b");
  } finally {
    s.close();
  }
});
