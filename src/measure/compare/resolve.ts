/**
 * What `launcher compare A B` compares: each side named as a stored run (a bench series or run
 * id, an eval run id), a deployment, a lane or a recipe, read from the store's evidence. A
 * side is one bench series (all its runs) and one eval run: the newest of what the name matches.
 * A stored run of one kind brings the newest run of the other kind of the same deployment, so
 * `compare SERIES1 SERIES2` still compares answers when both deployments were evaluated.
 */
import { UserError } from "../../config/errors.js";
import type { BenchRun, EvalRun, EvidenceStore, RunQuery } from "../../contract/evidence.js";
import type { Evidence } from "./compare.js";

/** The kinds a side can be named as, in the order an unprefixed name is tried; `KIND/NAME` picks one. */
export const SIDE_KINDS = ["series", "run", "deployment", "lane", "recipe"] as const;
export type SideKind = (typeof SIDE_KINDS)[number];

/** A side as found: its bench series (runs in order) and its eval runs, newest first. */
export interface Found {
  readonly kind: SideKind;
  readonly bench: readonly BenchRun[];
  readonly evals: readonly EvalRun[];
}

const inOrder = (runs: readonly BenchRun[]): BenchRun[] => [...runs].sort((x, y) => x.run - y.run);

/** The newest series among runs (newest first): all of its runs. */
function newestSeries(store: EvidenceStore, newest: readonly BenchRun[]): BenchRun[] {
  const first = newest[0];
  return first === undefined ? [] : inOrder(store.benchRuns({ series: first.series }));
}

/** By a query on both tables (deployment, target, recipe): the newest series and the evals. */
function byQuery(store: EvidenceStore, kind: SideKind, query: RunQuery): Found | undefined {
  const bench = newestSeries(store, store.benchRuns({ ...query, limit: 1 }));
  const evals = store.evalRuns(query);
  return bench.length === 0 && evals.length === 0 ? undefined : { kind, bench, evals };
}

/** The other kind of evidence of the deployment a stored run was made on. */
const sameDeployment = (deployment: string | undefined): RunQuery | undefined => (deployment === undefined ? undefined : { deployment });

const FINDERS: Record<SideKind, (store: EvidenceStore, name: string) => Found | undefined> = {
  series: (store, series) => {
    const bench = inOrder(store.benchRuns({ series }));
    const first = bench[0];
    if (first === undefined) return undefined;
    const q = sameDeployment(first.subject.deployment);
    return { kind: "series", bench, evals: q === undefined ? [] : store.evalRuns(q) };
  },
  run: (store, id) => {
    const bench = store.benchRuns({ id });
    if (bench[0] !== undefined) {
      const q = sameDeployment(bench[0].subject.deployment);
      return { kind: "run", bench: inOrder(store.benchRuns({ series: bench[0].series })), evals: q === undefined ? [] : store.evalRuns(q) };
    }
    const evals = store.evalRuns({ id });
    if (evals[0] === undefined) return undefined;
    const q = sameDeployment(evals[0].subject.deployment);
    return { kind: "run", bench: q === undefined ? [] : newestSeries(store, store.benchRuns({ ...q, limit: 1 })), evals };
  },
  deployment: (store, deployment) => byQuery(store, "deployment", { deployment }),
  lane: (store, target) => byQuery(store, "lane", { target }),
  recipe: (store, recipe) => byQuery(store, "recipe", { recipe }),
};

const isKind = (s: string): s is SideKind => (SIDE_KINDS as readonly string[]).includes(s);

/**
 * One side by its name: with a `KIND/` prefix as that kind, else as the first kind (in
 * SIDE_KINDS's order) with stored runs under that name. Read-only, so the pick is not refused
 * when a later kind matches too; the table's "served" rows show what was picked.
 */
export function findSide(store: EvidenceStore, name: string): Found {
  const slash = name.indexOf("/");
  const prefix = slash < 0 ? "" : name.slice(0, slash);
  const found = isKind(prefix) ? FINDERS[prefix](store, name.slice(slash + 1)) : firstFound(store, name);
  if (found === undefined) throw new UserError(`no stored bench or eval run for ${name}`, NO_RUNS_HINT);
  return found;
}

function firstFound(store: EvidenceStore, name: string): Found | undefined {
  for (const kind of SIDE_KINDS) {
    const f = FINDERS[kind](store, name);
    if (f !== undefined) return f;
  }
  return undefined;
}

const NO_RUNS_HINT =
  "name a recipe, deployment or lane that `launcher bench` or `launcher eval` ran on, or a stored run's id (`launcher bench --json` and `launcher eval --json` print them); a prefix picks the kind: series/ID, run/ID, deployment/NAME, lane/NAME, recipe/NAME";

/**
 * Both sides' evidence. Answers are compared on one question set: B's eval is its newest on A's
 * set when it has one (else its newest, and compare notes the sets differ).
 */
export function resolveSides(store: EvidenceStore, a: string, b: string): [Evidence, Evidence] {
  const fa = findSide(store, a);
  const fb = findSide(store, b);
  const ea = fa.evals[0];
  const eb = (ea === undefined ? undefined : fb.evals.find((e) => e.set.sha256 === ea.set.sha256)) ?? fb.evals[0];
  return [
    { label: a, bench: fa.bench, ...(ea === undefined ? {} : { eval: ea }) },
    { label: b, bench: fb.bench, ...(eb === undefined ? {} : { eval: eb }) },
  ];
}
