import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { advanceBoot, INITIAL_BOOT, splitTimestamp, TIMESTAMP, timeMs } from "../../src/engine/boot-log.js";
import { NODE_PREFIX, readLogLines } from "../../src/boot/explain.js";
import { vllm } from "../../src/engine/vllm/adapter.js";
import { HINT_PATTERNS, vllmHint } from "../../src/engine/vllm/hints.js";
import { HEADER, PREFIX, PREFIX_ONLY, readVllmLine } from "../../src/engine/vllm/log-shapes.js";
import { cutLine, LineSplitter } from "../../src/remote/lines.js";

/**
 * Every pattern launcher applies to container output, fed lines built to make a backtracking
 * pattern slow: long runs of the characters a pattern loops on, and near-misses (a match cut short,
 * repeated: `.*` between two literals then rescans the rest of the line from every occurrence of the
 * first). The time is bounded as a ratio to a plain scan of the same line, never as a figure.
 */

// A plain scan: a fixed regex that looks at every character once and matches none.
const PLAIN_SCAN = /[^\u0000]\u0000/;
// Linear patterns stay within a few plain scans (measured: 0.1-5x, up to 40x on a machine loaded
// 5 deep); a quadratic one is past 1,000x
// at 32 K characters. The first screen, at 1 K, catches worse than quadratic (which would not end
// at 32 K) and has room for the noise of sub-microsecond times.
const RATIO = 100;
const SCREEN_RATIO = 2_000;
const SIZES = [{ chars: 1024, ratio: SCREEN_RATIO }, { chars: 32 * 1024, ratio: RATIO }] as const;
const MEGABYTE = 1024 * 1024;

type Matcher = (line: string) => unknown;

const all = <T>(xs: readonly T[]): T[] => [...xs];
const regexes: { name: string; re: RegExp }[] = [
  ...vllm.bootPhases.map((p) => ({ name: `boot phase ${p.phase} /${p.pattern.source}/`, re: p.pattern })),
  ...all(vllm.fatalPatterns).map((re) => ({ name: `fatal /${re.source}/`, re })),
  ...all(vllm.wrapperPatterns).map((re) => ({ name: `wrapper /${re.source}/`, re })),
  ...all(vllm.peerLossPatterns).map((re) => ({ name: `peer loss /${re.source}/`, re })),
  ...all(vllm.warningPatterns).map((re) => ({ name: `warning /${re.source}/`, re })),
  ...all(vllm.rendezvousPatterns).map((re) => ({ name: `rendezvous /${re.source}/`, re })),
  { name: "exception", re: vllm.exceptionPattern },
  { name: "ready", re: vllm.readyPattern },
  { name: "process prefix", re: PREFIX },
  { name: "prefix only", re: PREFIX_ONLY },
  { name: "logger header", re: HEADER },
  { name: "docker timestamp", re: TIMESTAMP },
  { name: "launcher logs' node prefix", re: NODE_PREFIX },
  ...HINT_PATTERNS.flatMap((p) => (p instanceof RegExp ? [{ name: `hint /${p.source}/`, re: p }] : [])),
];
const finders: { name: string; f: Matcher }[] = [
  ...regexes.map(({ name, re }) => ({ name, f: (l: string) => re.exec(l) })),
  ...HINT_PATTERNS.flatMap((p, i) => (p instanceof RegExp ? [] : [{ name: `hint finder ${i}`, f: p }])),
];
const readers: { name: string; f: Matcher }[] = [
  { name: "readVllmLine", f: readVllmLine },
  { name: "advanceBoot", f: (l) => advanceBoot(vllm, INITIAL_BOOT, l) },
  { name: "vllmHint", f: (l) => vllmHint(l, [l]) },
  { name: "splitTimestamp", f: splitTimestamp },
  { name: "timeMs", f: timeMs },
  { name: "explain's line reader", f: (l) => readLogLines(vllm, l) },
  { name: "the stream's line splitter", f: (l) => new LineSplitter(() => undefined).push(l) },
];

/** A matching line of `re` (fast-check builds one; it knows neither \b nor the i flag, left out here). */
function matchOf(re: RegExp): string {
  const plain = new RegExp(re.source.replace(/\\b/g, ""), re.flags.replace("i", ""));
  const [sample] = fc.sample(fc.stringMatching(plain), { numRuns: 1, seed: 25 });
  return plain.exec(sample as string)?.[0] ?? (sample as string);
}

/** A match cut short at a dozen places: each a line's repeated unit. */
function nearMisses(re: RegExp): string[] {
  const m = matchOf(re);
  const step = Math.max(1, Math.floor(m.length / 12));
  const cuts = new Set<number>([m.length - 1]);
  for (let k = 1; k < m.length; k += step) cuts.add(k);
  return [...cuts].filter((k) => k > 0).map((k) => m.slice(0, k));
}

// Runs of what patterns loop on: words, capitals, digits, spaces, dotted names, shared objects,
// brackets, colour codes, "\r" redraws, a Python exception's shape, a timestamp.
const GENERIC = ["a", "A", "1", " ", "a.", "A.", "x.so", "(", "(a ", "[a:1", ":1", "\x1b[;1", "\x1b[0;36m", "a\r", "Error", "Error: ", "2026-01-01T00:00:00Z "];

const fill = (unit: string, chars: number): string => unit.repeat(Math.ceil(chars / unit.length)).slice(0, chars);

/** Milliseconds per call, repeated until half a millisecond has passed (once when one call takes longer). */
function perCall(f: Matcher, line: string): number {
  let n = 0;
  const t0 = performance.now();
  let spent = 0;
  do {
    f(line);
    n++;
    spent = performance.now() - t0;
  } while (spent < 0.5);
  return spent / n;
}

// The machine is shared: of five rounds the quickest says what the code costs, the others what
// else ran meanwhile. A slow pattern stops after one round.
const ROUNDS = 5;
function quickest(f: Matcher, line: string, enough: number): number {
  let best = Number.POSITIVE_INFINITY;
  for (let i = 0; i < ROUNDS && best >= enough; i++) best = Math.min(best, perCall(f, line));
  return best;
}

const scans = new Map<string, number>();
const plainScan = (line: string): number => {
  const key = `${line.length}:${line.slice(0, 64)}`;
  let t = scans.get(key);
  if (t === undefined) {
    t = quickest((l) => PLAIN_SCAN.exec(l), line, 0);
    scans.set(key, t);
  }
  return t;
};

const fixedCost = new WeakMap<Matcher, number>();

/** The time `f` takes on the line, beyond what it takes on a one-character line, over a plain scan's. */
function ratio(f: Matcher, line: string, bound: number): number {
  const scan = plainScan(line);
  let fixed = fixedCost.get(f);
  if (fixed === undefined) {
    fixed = quickest(f, "x", 0);
    fixedCost.set(f, fixed);
  }
  // Past the bound after one round is past it for good: a quadratic pattern is not run again.
  return Math.max(0, quickest(f, line, fixed + bound * scan) - fixed) / scan;
}

type Sizes = readonly { readonly chars: number; readonly ratio: number }[];

/** A reader applies every pattern to a line (some twice): its bound is that many plain scans more. */
const READER_PASSES = 2 * regexes.length;
const forReader = (sizes: Sizes): Sizes => sizes.map((s) => ({ chars: s.chars, ratio: s.ratio * READER_PASSES }));

function assertLinear(name: string, f: Matcher, unit: string, sizes: Sizes): void {
  for (const { chars, ratio: bound } of sizes) {
    const line = fill(unit, chars);
    const r = ratio(f, line, bound);
    assert.ok(r < bound, `${name} on ${JSON.stringify(unit)} repeated to ${chars} characters: ${r.toFixed(0)} x a plain scan (bound ${bound})`);
  }
}

test("every pattern is linear on near-misses of its own match and on long runs", () => {
  for (const { name, re } of regexes) {
    const f: Matcher = (l) => re.exec(l);
    for (const unit of [...nearMisses(re), ...GENERIC]) assertLinear(name, f, unit, SIZES);
  }
  for (const { name, f } of finders.filter((x) => x.name.startsWith("hint finder"))) {
    for (const unit of ["x/_C.abi3.so: undefined symbol:", "x.so", "x.so: undefined symbol: ", ": undefined symbol: a", ...GENERIC]) assertLinear(name, f, unit, SIZES);
  }
});

test("every pattern and reader takes a 1 MB line in time linear in it", () => {
  const sizes: Sizes = [...SIZES, { chars: MEGABYTE, ratio: RATIO }];
  for (const unit of ["a", "A.", "x.so", "Worker proc ", "Launching vLLM (v", "(a ", "\x1b[;1", "Error: "]) {
    for (const { name, f } of finders) assertLinear(name, f, unit, sizes);
    for (const { name, f } of readers) assertLinear(name, f, unit, forReader(sizes));
  }
});

test("the readers are linear on every pattern's near-misses", () => {
  for (const { re } of regexes) {
    const unit = matchOf(re).slice(0, -1);
    if (unit === "") continue;
    for (const { name, f } of readers) assertLinear(`${name} (near-miss of /${re.source}/)`, f, unit, forReader(SIZES));
  }
});

test("the plain scan used as the measure is itself linear: its time grows with the line, not its square", () => {
  const small = plainScan(fill("Worker proc ", 64 * 1024));
  const large = plainScan(fill("Worker proc ", MEGABYTE));
  assert.ok(large / small < 64, `1 MB: ${large} ms, 64 K: ${small} ms`);
  assert.equal(cutLine("x".repeat(10)), "x".repeat(10));
});
