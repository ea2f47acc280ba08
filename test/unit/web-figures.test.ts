import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { encodeError, encodeEvent, type UpEvent } from "../../src/boot/up-events.js";
import { Interrupted } from "../../src/config/abort.js";
import { RemoteError, UserError } from "../../src/config/errors.js";
import type { BenchRun, EvalRun, ServeResult } from "../../src/contract/evidence.js";
import type { ActivityRecord, HistoryBoot, MetricsPoint } from "../../src/contract/read-api.js";
import type { BootState } from "../../src/engine/boot-log.js";
import {
  axisTicks,
  chartColumns,
  CHART_WINDOW_MS,
  layoutBoot,
  LIMITS,
  phaseClass,
  readBootEvents,
  shapeHistory,
  shapeRuns,
  type BootView,
} from "../../web/src/figures/shape.js";

// The page's figures as data (web/src/figures/shape.ts). Boot events are made with the daemon's
// own encoder (src/boot/up-events.ts), so the page's reading of them is proved against what the
// daemon sends.

const T0 = Date.parse("2026-12-05T04:00:00.000Z");
const s = (seconds: number): number => T0 + seconds * 1000;

const wire = (e: UpEvent): BootView["events"][number] => JSON.parse(encodeEvent(e)) as BootView["events"][number];
const node = (name: string, phase: BootState["phase"], at: number, figures: Record<string, string> = {}): UpEvent => ({
  type: "node",
  node: name,
  state: { phase, figures, ready: phase === "serving", lastLines: [] },
  t: s(at),
});
const accepted: UpEvent = { type: "accepted", deployment: "d", cluster: "c", t: s(0) };

function bootOf(events: readonly UpEvent[], state: BootView["state"] = "booting"): BootView {
  return { deployment: "d", cluster: "c", running: state === "booting", state, started_at: new Date(events[0]?.t ?? T0).toISOString(), nodes: {}, events: events.map(wire) };
}

describe("a boot's time line", () => {
  test("each node's phases in order on one axis from the boot's start to its end, the latest phase and figures", () => {
    const events: UpEvent[] = [
      accepted,
      { type: "say", text: "hello", t: s(1) },
      node("n1", "starting", 2),
      node("n2", "starting", 2),
      node("n1", "loading", 10),
      node("n1", "loading", 12, { load_seconds: "9.5" }),
      node("n2", "loading", 11),
      node("n1", "kv-cache", 40, { load_seconds: "9.5", kv_tokens: "123456" }),
      node("n2", "serving", 60),
      node("n1", "serving", 80, { load_seconds: "9.5", kv_tokens: "123456" }),
      { type: "memory", node: "n1", sample: { totalKiB: 128 * 1024 * 1024, availableKiB: 20 * 1024 * 1024 }, t: s(50) },
      { type: "memory", node: "n1", sample: { totalKiB: 128 * 1024 * 1024, availableKiB: 30 * 1024 * 1024 }, t: s(70) },
      { type: "done", t: s(99) },
      { type: "result", outcome: { status: "ready", deployment: "d", endpoint: "http://x", served_model: "m", seconds: 100 }, t: s(100) },
    ];
    const shape = layoutBoot(readBootEvents(bootOf(events, "ready")), s(5000));
    assert.equal(shape.running, false);
    assert.equal(shape.end - shape.start, 100_000, "the axis ends at the result, whatever the clock says");
    assert.deepEqual(shape.nodes.map((n) => [n.node, n.phase]), [["n1", "serving"], ["n2", "serving"]]);
    const n1 = shape.nodes[0];
    assert.ok(n1 !== undefined);
    assert.deepEqual(n1.segments.map((g) => g.phase), ["starting", "loading", "kv-cache", "serving"], "a repeated phase is one segment");
    assert.deepEqual(n1.segments.map((g) => [g.left, Number(g.width.toFixed(6))]), [[0.02, 0.08], [0.1, 0.3], [0.4, 0.4], [0.8, 0.2]]);
    assert.ok(n1.segments.every((g) => !g.running && !g.restart));
    assert.deepEqual(n1.figures, [["load_seconds", "9.5"], ["kv_tokens", "123456"]]);
    assert.deepEqual(n1.memory, { minAvailableKiB: 20 * 1024 * 1024, totalKiB: 128 * 1024 * 1024 });
    assert.equal(shape.cause, undefined);
  });

  test("a ready boot: each node serves from the result on, as status judges a deployment whose head answers /health (a headless worker's log never says so)", () => {
    const ready: UpEvent = { type: "result", outcome: { status: "ready", deployment: "d", endpoint: "http://x", served_model: "m", seconds: 40 }, t: s(40) };
    const shape = layoutBoot(readBootEvents(bootOf([accepted, node("n1", "warmup", 10), node("n2", "graph-capture", 10), node("n1", "serving", 30), ready], "ready")), s(99));
    assert.deepEqual(shape.nodes.map((n) => [n.node, n.phase]), [["n1", "serving"], ["n2", "serving"]]);
    assert.deepEqual(shape.nodes.map((n) => n.segments.map((g) => [g.phase, g.byResult])), [[["warmup", false], ["serving", false]], [["graph-capture", false], ["serving", true]]]);
    assert.equal(shape.nodes[1]?.segments.at(-1)?.left, 1, "from the result's time");
    const running = layoutBoot(readBootEvents(bootOf([accepted, node("n2", "graph-capture", 10)])), s(99));
    assert.equal(running.nodes[0]?.phase, "graph-capture", "not before the result");
  });

  test("while the boot runs, the axis ends at now and the running phase grows with it", () => {
    const facts = readBootEvents(bootOf([accepted, node("n1", "starting", 0), node("n1", "loading", 10)]));
    const at20 = layoutBoot(facts, s(20));
    const at40 = layoutBoot(facts, s(40));
    assert.equal(at20.running, true);
    const last = (x: typeof at20) => x.nodes[0]?.segments.at(-1);
    assert.equal(last(at20)?.running, true);
    assert.equal(last(at20)?.end, s(20));
    assert.equal(last(at40)?.end, s(40));
    assert.equal(last(at20)?.width, 0.5);
    assert.equal(last(at40)?.width, 0.75);
    assert.equal(layoutBoot(facts, s(5)).end, s(10), "a clock behind the last event does not cut it");
  });

  test("a node whose phase went back (its engine started over) gets a new segment marked as a restart; its phase is the latest", () => {
    const facts = readBootEvents(bootOf([accepted, node("n1", "loading", 1), node("n1", "kv-cache", 5), node("n1", "loading", 9), node("n1", "kv-cache", 12)]));
    const n1 = layoutBoot(facts, s(20)).nodes[0];
    assert.deepEqual(n1?.segments.map((g) => [g.phase, g.restart]), [["loading", false], ["kv-cache", false], ["loading", true], ["kv-cache", false]]);
    assert.equal(n1?.phase, "kv-cache");
  });

  test("a failed boot's root cause: the node blamed (its rank dropped), the message, and the lines the error carries", () => {
    const detail = ["cause: RuntimeError: Engine core initialization failed", "last lines of n2's log:", "Traceback (most recent call last):", "RuntimeError: Engine core initialization failed"].join("\n");
    const error = encodeError(new RemoteError("n2 (rank 1)", "boot of d failed: engine core init failed", detail, "see the traceback", { node: "n2", rank: 1 }));
    const events: UpEvent[] = [accepted, node("n1", "loading", 1), node("n2", "loading", 1), { type: "error", error, t: s(30) }];
    const shape = layoutBoot(readBootEvents(bootOf(events, "failed")), s(99));
    assert.equal(shape.running, false);
    assert.equal(shape.end, s(30));
    assert.equal(shape.cause?.node, "n2");
    assert.equal(shape.cause?.message, "n2 (rank 1): boot of d failed: engine core init failed");
    assert.equal(shape.cause?.hint, "see the traceback");
    assert.deepEqual(shape.cause?.lines, detail.split("\n"));
    assert.deepEqual(shape.nodes.map((n) => n.phase), ["loading", "loading"], "a failed boot's nodes stay where their logs left them");
    const early: UpEvent[] = [accepted, node("n1", "loading", 1), { type: "memory", node: "n2", sample: { totalKiB: 1, availableKiB: 1 }, t: s(2) }, { type: "error", error, t: s(3) }];
    const before = layoutBoot(readBootEvents(bootOf(early, "failed")), s(9));
    assert.equal(before.cause?.node, "n2", "a node that failed before it said a phase, known from the guard's samples");
    assert.deepEqual(before.nodes.map((n) => n.node), ["n1"], "a row is drawn for each node that said a phase");
  });

  test("the node blamed is the error's own value, one of the boot's nodes; the words naming it are never parsed", () => {
    const blamed = (e: RemoteError): string | undefined => layoutBoot(readBootEvents(bootOf([accepted, node("n1", "loading", 1), node("n10", "loading", 1), { type: "error", error: encodeError(e), t: s(3) }], "failed")), s(9)).cause?.node;
    assert.equal(blamed(new RemoteError("n10 (rank 3)", "x", undefined, undefined, { node: "n10", rank: 3 })), "n10");
    assert.equal(blamed(new RemoteError("n1 (rank 0)", "x")), undefined, "an error without its blame as values names no node");
    assert.equal(blamed(new RemoteError("elsewhere", "x", undefined, undefined, { node: "elsewhere" })), undefined, "a node not of this boot");
  });

  test("a user error's diagnostics and an interruption are causes without a node, worded as the CLI words them", () => {
    const diag = { severity: "error" as const, loc: { file: "r.toml", line: 3, col: 1 }, message: "bad field" };
    const user = readBootEvents(bootOf([accepted, { type: "error", error: encodeError(new UserError("recipe refused", "fix it", [diag])), t: s(1) }]));
    assert.equal(user.cause?.node, undefined);
    assert.deepEqual(user.cause?.lines, ["r.toml:3:1: error: bad field"]);
    const stopped = readBootEvents(bootOf([accepted, { type: "error", error: encodeError(new Interrupted("SIGINT", "rolled back")), t: s(1) }]));
    assert.equal(stopped.cause?.message, "interrupted (SIGINT): rolled back");
    assert.deepEqual(stopped.cause?.lines, []);
  });

  test("no events: no nodes, the axis starts at the boot's start; events it does not know or cannot read are skipped", () => {
    const empty = layoutBoot(readBootEvents({ events: [], started_at: new Date(s(0)).toISOString() }), s(7));
    assert.deepEqual(empty.nodes, []);
    assert.equal(empty.start, s(0));
    assert.equal(empty.end, s(7));
    const odd = readBootEvents({ events: [{ type: "future", t: s(1) }, { type: "node", t: s(2), node: "n1" }, wire(node("n1", "loading", 3))], started_at: new Date(s(0)).toISOString() });
    assert.deepEqual(odd.nodes.map((n) => n.changes.length), [1]);
  });

  test("a boot of any size draws a bounded picture: segments, figures, cause lines and their length", () => {
    const phases = ["loading", "kv-cache"] as const;
    const figures = Object.fromEntries(Array.from({ length: 100 }, (_, k) => [`f${k}`, "x".repeat(5000)]));
    const flaps: UpEvent[] = Array.from({ length: 5000 }, (_, i) => node("n1", phases[i % 2] as BootState["phase"], i / 10, i === 4999 ? figures : {}));
    const detail = Array.from({ length: 1000 }, () => "y".repeat(5000)).join("\n");
    const events = [accepted, ...flaps, { type: "error", error: encodeError(new RemoteError("n1", "failed", detail)), t: s(600) } as UpEvent];
    const shape = layoutBoot(readBootEvents(bootOf(events, "failed")), s(600));
    const n1 = shape.nodes[0];
    assert.equal(n1?.segments.length, LIMITS.segments);
    assert.equal(n1?.dropped, 5000 - LIMITS.segments);
    assert.equal(n1?.figures.length, LIMITS.figures);
    assert.ok(n1?.figures.every(([, v]) => v.length <= LIMITS.text));
    assert.equal(shape.cause?.lines.length, LIMITS.causeLines);
    assert.ok(shape.cause?.lines.every((l) => l.length <= LIMITS.text));
  });

  test("the axis' ticks fall on round steps, a few of them, whatever the span", () => {
    for (const spanMs of [0, 900, 45_000, 3_600_000, 30 * 86_400_000]) {
      const ticks = axisTicks(spanMs);
      assert.ok(ticks.length >= 1 && ticks.length <= 7, `${spanMs}: ${ticks.length}`);
      assert.ok(ticks.every((t) => t.at >= 0 && t.at <= 1));
    }
    assert.deepEqual(axisTicks(45_000).map((t) => t.label), ["0 s", "10 s", "20 s", "30 s", "40 s"]);
  });

  test("a phase keeps one colour class everywhere; a phase this page does not know gets the other colour, its name untouched", () => {
    assert.equal(phaseClass("starting"), "phase-0");
    assert.equal(phaseClass("serving"), "phase-5");
    assert.equal(phaseClass("compiling"), "phase-other");
  });
});

const historyBoot = (id: number, startedAt: string, over: Partial<HistoryBoot> = {}): HistoryBoot => ({
  id,
  deployment: "d",
  recipe: "r",
  recipe_hash: "h",
  cluster: "c",
  served_model: "m",
  endpoint: "http://x",
  nodes: ["n1", "n2"],
  started_at: startedAt,
  outcome: "ready",
  seconds: 100,
  ended_at: startedAt,
  phases: [
    { node: "n1", phase: "starting", started_at: startedAt, seconds: 10, figures: {} },
    { node: "n2", phase: "starting", started_at: startedAt, seconds: 50, figures: {} },
    { node: "n1", phase: "loading", started_at: startedAt, seconds: 60, figures: {} },
    { node: "n1", phase: "kv-cache", started_at: startedAt, seconds: 30, figures: {} },
    { node: "n1", phase: "serving", started_at: startedAt, figures: {} },
  ],
  ...over,
});

describe("a recipe's past boots as bars", () => {
  test("newest first, the head node's phases stacked (serving is the end, no step), one axis for all, a legend in boot order", () => {
    const boots = [historyBoot(1, "2026-12-01T00:00:00Z"), historyBoot(3, "2026-12-03T00:00:00Z", { seconds: 200, outcome: "failed", error: "boom" }), historyBoot(2, "2026-12-02T00:00:00Z"), historyBoot(9, "2026-12-09T00:00:00Z", { recipe: "other" })];
    const shape = shapeHistory("r", boots);
    assert.deepEqual(shape.bars.map((b) => b.id), [3, 2, 1]);
    assert.equal(shape.scaleSeconds, 200);
    const first = shape.bars[0];
    assert.deepEqual(first?.segments.map((g) => [g.phase, g.seconds, g.left, g.width]), [["starting", 10, 0, 0.05], ["loading", 60, 0.05, 0.3], ["kv-cache", 30, 0.35, 0.15]]);
    assert.equal(first?.outcome, "failed");
    assert.equal(first?.error, "boom");
    assert.deepEqual(shape.phases, ["starting", "loading", "kv-cache"]);
  });

  test("at most 20 bars; none for a recipe without boots; a running boot's open phase counts nothing yet", () => {
    const many = Array.from({ length: 50 }, (_, i) => historyBoot(i, new Date(T0 + i * 60_000).toISOString()));
    const shape = shapeHistory("r", many);
    assert.equal(shape.bars.length, LIMITS.historyBars);
    assert.equal(shape.bars[0]?.id, 49);
    assert.deepEqual(shapeHistory("nothing", many).bars, []);
    const { seconds: _s, ended_at: _e, ...rest } = historyBoot(1, "2026-12-01T00:00:00Z");
    const running: HistoryBoot = { ...rest, outcome: "booting", phases: [{ node: "n1", phase: "loading", started_at: "2026-12-01T00:00:00Z", figures: {} }] };
    const bar = shapeHistory("r", [running]).bars[0];
    assert.equal(bar?.seconds, 0);
    assert.deepEqual(bar?.segments.map((g) => g.seconds), [0]);
  });
});

describe("engine metrics as uPlot's columns", () => {
  const point = (at: number, over: Partial<MetricsPoint> = {}): MetricsPoint => ({ t: s(at), generation_tps: 10 + at, prompt_tps: 100, kv_cache_usage: 0.25, requests_running: 1, requests_waiting: 0, ...over });

  test("an empty window draws nothing", () => {
    for (const m of ["generation_tps", "kv_cache_usage", "queue", "ttft"] as const) {
      const shape = chartColumns(m, [], []);
      assert.equal(shape.points, 0);
      assert.ok(shape.columns.every((c) => c.length === 0));
    }
  });

  test("x in seconds, in time order; generation with prompt, the queue's running and waiting, the KV cache in percent", () => {
    const pts = [point(10), point(0), point(5)];
    const tps = chartColumns("generation_tps", pts, []);
    assert.deepEqual(tps.columns, [[s(0) / 1000, s(5) / 1000, s(10) / 1000], [10, 15, 20], [100, 100, 100]]);
    assert.deepEqual(chartColumns("kv_cache_usage", pts, []).columns[1], [25, 25, 25]);
    assert.equal(chartColumns("queue", pts, []).columns.length, 3);
  });

  test("a value the engine did not report is a hole; a sample without any of a chart's values is not one of its points", () => {
    const { prompt_tps: _unreported, ...noPrompt } = point(5);
    const shape = chartColumns("generation_tps", [point(0), noPrompt, { t: s(10), kv_cache_usage: 0.5 }], []);
    assert.equal(shape.points, 2);
    assert.deepEqual(shape.columns[2], [100, null]);
  });

  test("a pause much longer than the usual interval is a gap: a null row breaks the line", () => {
    const pts = [0, 5, 10, 15, 200, 205].map((t) => point(t));
    const shape = chartColumns("queue", pts, []);
    assert.equal(shape.points, 6);
    assert.equal(shape.columns[0].length, 7);
    assert.equal(shape.columns[0][4], (s(15) + s(200)) / 2000);
    assert.deepEqual(shape.columns.slice(1).map((c) => c[4]), [null, null]);
  });

  test("only the last hour before the newest sample, and at most LIMITS.chartPoints of it", () => {
    const old = chartColumns("generation_tps", [point(0), point(CHART_WINDOW_MS / 1000 + 1)], []);
    assert.equal(old.points, 1);
    const huge = Array.from({ length: 100_000 }, (_, i) => point(i / 100));
    const shape = chartColumns("generation_tps", huge, []);
    assert.equal(shape.points, LIMITS.chartPoints);
    assert.equal(shape.columns[0].at(-1), s(999.99) / 1000, "the newest kept");
  });

  test("TTFT: one point per request that has one, from the activity records", () => {
    const activity: ActivityRecord[] = [
      { t: s(2), model: "m", status: 200, ttft_ms: 80 },
      { t: s(1), model: "m", status: 200, ttft_ms: 120 },
      { t: s(3), model: "m", status: 503, error: "no engine" },
    ];
    const shape = chartColumns("ttft", [point(0)], activity);
    assert.equal(shape.points, 2);
    assert.deepEqual(shape.columns, [[s(1) / 1000, s(2) / 1000], [120, 80]]);
  });
});

describe("stored runs as plot series", () => {
  const result = (c: number, out: number, ttft: number): ServeResult =>
    ({ max_concurrency: c, completed: 10, failed: 0, output_throughput: out, mean_ttft_ms: ttft, mean_tpot_ms: 20, request_throughput: 1, total_token_throughput: out * 2, duration: 10, total_input_tokens: 1, total_output_tokens: 1, ttfts: [], latencies: [], input_lens: [], output_lens: [], errors: [] }) as unknown as ServeResult;
  const bench = (series: string, run: number, recipe: string, outs: readonly [number, number]): BenchRun => ({
    id: `${series}-${run}`,
    series,
    run,
    started_at: "2026-12-05T03:00:00Z",
    ended_at: "2026-12-05T03:10:00Z",
    subject: { target: "lane", recipe },
    workload: { concurrencies: [1, 8] },
    results: [result(1, outs[0], 50), result(8, outs[1], 90)],
  });
  const evalRun = (id: string, recipe: string, correct: number, sha = "aaa"): EvalRun => ({ id, started_at: "2026-12-05T03:00:00Z", ended_at: "2026-12-05T03:10:00Z", subject: { target: "lane", recipe }, set: { path: "set.jsonl", sha256: sha, items: 176 }, temperature: 0, request_options: {}, items: [], correct, total: 176 });

  test("a compare: two series side by side, each point the mean of its runs with their range, and a line that tells them apart", () => {
    const runs = { kind: "compare" as const, bench: [bench("A", 1, "base", [50, 400]), bench("A", 2, "base", [54, 420]), bench("B", 1, "fp8", [46, 430])], evals: [evalRun("e1", "base", 167), evalRun("e2", "fp8", 158)] };
    const shape = shapeRuns(runs);
    assert.equal(shape.drawn, 5);
    assert.deepEqual(shape.concurrencies, [1, 8]);
    const a = shape.series[0];
    assert.deepEqual(a?.points.output_throughput.map((p) => [p.concurrency, p.mean, p.min, p.max, p.values.length]), [[1, 52, 50, 54, 2], [8, 410, 400, 420, 2]]);
    assert.deepEqual(a?.points.output_throughput.map((p) => p.x), [0.25, 0.75]);
    assert.equal(shape.yMax.output_throughput, 430);
    assert.deepEqual(shape.summary, ["base: 167/176 · single-stream 52 tok/s · at 8 concurrent 410 tok/s", "fp8 vs base: 158/176 (−9) · single-stream 46 tok/s (−12 %) · at 8 concurrent 430 tok/s (+5 %)"]);
  });

  test("an eval of another set is not set against the reference's; no runs draw nothing", () => {
    const shape = shapeRuns({ kind: "eval", bench: [], evals: [evalRun("e1", "base", 167), evalRun("e2", "fp8", 158, "bbb")] });
    assert.deepEqual(shape.summary, ["base: 167/176", "fp8 vs base: 158/176"]);
    const none = shapeRuns({ kind: "bench", bench: [], evals: [] });
    assert.equal(none.drawn, 0);
    assert.deepEqual(none.summary, []);
  });

  test("at most LIMITS.benchSeries series and LIMITS.evals evals are drawn", () => {
    const benchRuns = Array.from({ length: 30 }, (_, i) => bench(`S${i}`, 1, `r${i}`, [10, 20]));
    const evals = Array.from({ length: 50 }, (_, i) => evalRun(`e${i}`, `r${i}`, i));
    const shape = shapeRuns({ kind: "compare", bench: benchRuns, evals });
    assert.equal(shape.series.length, LIMITS.benchSeries);
    assert.equal(shape.evals.length, LIMITS.evals);
    assert.equal(shape.drawn, LIMITS.benchSeries + LIMITS.evals);
    assert.ok(shape.summary.length <= LIMITS.benchSeries + LIMITS.evals);
  });
});
