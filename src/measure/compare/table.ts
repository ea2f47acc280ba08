/**
 * The comparison as one table, for a terminal (aligned columns) and for a recipe comment or an
 * issue (`--markdown`). Both are drawn from the same rows, so they never say different things.
 */
import type { BootFigures } from "../../contract/evidence.js";
import type { Comparison, MetricComparison, SideSummary, Spread } from "./compare.js";
import type { DifferenceInterval } from "./stats.js";

export interface Row {
  /** The group the row belongs to; a new section starts a new block. */
  readonly section: string;
  readonly label: string;
  readonly a: string;
  readonly b: string;
  /** B against A: the verdict and how it was had ("" where nothing is judged). */
  readonly verdict: string;
}

const fixed = (x: number, digits: number): string => x.toFixed(digits);
const signed = (x: number, digits: number): string => `${x >= 0 ? "+" : ""}${x.toFixed(digits)}`;
/** An interval's confidence as printed: 95%, 99.2% (a Bonferroni-corrected one), ... */
const percentOf = (confidence: number): string => `${Number((confidence * 100).toFixed(1))}%`;

function spread(s: Spread, digits: number): string {
  if (s.runs === 1) return `${fixed(s.mean, digits)} (1 run)`;
  return `${fixed(s.mean, digits)} ± ${fixed(s.sd, digits)} (${s.runs} runs)`;
}

const METHOD_NAMES: Record<DifferenceInterval["method"], string> = { welch: "Welch", bootstrap: "bootstrap over requests" };

function judged(m: MetricComparison): string {
  const change = m.change === undefined ? "" : ` ${signed(m.change * 100, 1)}%`;
  if (m.interval === undefined) return `${m.verdict}: ${m.no_interval ?? "one run a side, run bench --runs 2 or more"}`;
  const ci = `${METHOD_NAMES[m.interval.method]} ${percentOf(m.interval.confidence)} CI ${signed(m.interval.low, m.digits)}..${signed(m.interval.high, m.digits)}`;
  return `${m.verdict}${change} (${ci})`;
}

const orDash = (x: string | number | undefined): string => (x === undefined ? "-" : String(x));

function servedRows(a: SideSummary, b: SideSummary): Row[] {
  const section = "served";
  const recipe = (s: SideSummary): string => (s.recipe === undefined ? "-" : `${s.recipe}${s.recipe_hash === undefined ? "" : ` (${s.recipe_hash})`}`);
  const series = (s: SideSummary): string => (s.series === undefined ? "-" : `${s.series} (${s.runs} run${s.runs === 1 ? "" : "s"})`);
  const evalRun = (s: SideSummary): string => (s.eval_run === undefined ? "-" : `${s.eval_run.id} (${s.eval_run.set})`);
  return [
    { section, label: "recipe", a: recipe(a), b: recipe(b), verdict: "" },
    { section, label: "deployment", a: orDash(a.deployment), b: orDash(b.deployment), verdict: "" },
    { section, label: "engine", a: orDash(a.engine_version), b: orDash(b.engine_version), verdict: "" },
    { section, label: "bench series", a: series(a), b: series(b), verdict: "" },
    { section, label: "eval run", a: evalRun(a), b: evalRun(b), verdict: "" },
  ];
}

/** Boot figures: one boot a side, so shown, not judged. */
function bootRows(a: BootFigures | undefined, b: BootFigures | undefined): Row[] {
  const section = "boot";
  const load = (f: BootFigures | undefined): string => (f?.load_seconds === undefined ? "-" : `${f.load_seconds.toFixed(1)} s`);
  return [
    { section, label: "load time", a: load(a), b: load(b), verdict: "" },
    { section, label: "KV cache tokens", a: orDash(a?.kv_tokens), b: orDash(b?.kv_tokens), verdict: "" },
    { section, label: "max concurrency", a: orDash(a?.max_concurrency), b: orDash(b?.max_concurrency), verdict: "" },
  ];
}

export function rows(c: Comparison): Row[] {
  const out: Row[] = [...servedRows(c.a, c.b), ...bootRows(c.a.boot, c.b.boot)];
  for (const r of c.requests) {
    const section = `bench, concurrency ${r.concurrency}`;
    out.push({ section, label: "requests ok / failed", a: `${r.a.completed} / ${r.a.failed}`, b: `${r.b.completed} / ${r.b.failed}`, verdict: "" });
    for (const m of c.bench.filter((x) => x.concurrency === r.concurrency)) {
      out.push({ section, label: m.label, a: spread(m.a, m.digits), b: spread(m.b, m.digits), verdict: judged(m) });
    }
  }
  if (c.eval !== undefined) {
    const e = c.eval;
    const t = e.test;
    const diff = e.b.correct - e.a.correct;
    const how = `McNemar exact p=${t.p.toFixed(3)} on ${t.paired} items both answered: right in A only ${t.a_only}, in B only ${t.b_only}`;
    out.push({ section: "eval", label: "score", a: `${e.a.correct}/${e.a.total}`, b: `${e.b.correct}/${e.b.total} (${diff >= 0 ? "+" : ""}${diff})`, verdict: `${e.verdict} (${how})` });
  }
  return out;
}

/** Aligned columns; each section under its own heading line. */
export function textTable(c: Comparison): string {
  const all = rows(c);
  const header = { label: "", a: `A: ${c.a.label}`, b: `B: ${c.b.label}`, verdict: "B vs A" };
  const width = (f: (r: Omit<Row, "section">) => string): number => Math.max(...[header, ...all].map((r) => f(r).length));
  const wl = width((r) => r.label);
  const wa = width((r) => r.a);
  const wb = width((r) => r.b);
  const line = (r: Omit<Row, "section">): string => `  ${r.label.padEnd(wl)}  ${r.a.padEnd(wa)}  ${r.b.padEnd(wb)}  ${r.verdict}`.trimEnd();
  const out = [line(header)];
  let section: string | undefined;
  for (const r of all) {
    if (r.section !== section) out.push(r.section);
    section = r.section;
    out.push(line(r));
  }
  return [...out, ...c.warnings.map((w) => `note: ${w}`)].join("\n");
}

/** A pipe in a cell would end it early: GitHub's markdown takes `\|` as a literal one. */
const cell = (s: string): string => s.replaceAll("|", "\\|");

/** One markdown table, sections as bold rows, notes as a list under it. */
export function markdownTable(c: Comparison): string {
  const out = [`| | A: ${cell(c.a.label)} | B: ${cell(c.b.label)} | B vs A |`, "|---|---|---|---|"];
  let section: string | undefined;
  for (const r of rows(c)) {
    if (r.section !== section) out.push(`| **${cell(r.section)}** | | | |`);
    section = r.section;
    out.push(`| ${cell(r.label)} | ${cell(r.a)} | ${cell(r.b)} | ${cell(r.verdict)} |`);
  }
  if (c.warnings.length > 0) out.push("", ...c.warnings.map((w) => `- note: ${w}`));
  return out.join("\n");
}
