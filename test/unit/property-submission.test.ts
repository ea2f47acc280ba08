/**
 * The control API's submission decoder at volume (issue 25): any JSON a client posts is a
 * submission or a refusal naming its fields; a submission's path check, cluster and recipes give
 * a value, a UserError, or diagnostics at file:line:col of the files it sent, never an internal
 * error. Settings: ./property.ts.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import fc from "fast-check";
import { parseCluster } from "../../src/cluster/parse.js";
import { UserError } from "../../src/config/errors.js";
import { clusterFileProblems, submissionPathProblem, submittedCluster, submittedRecipes, type DaemonScope } from "../../src/app/admit.js";
import { UpSubmissionSchema } from "../../src/app/up-submission.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { assertPositioned, holds, mutatedText, reportInputsTried, typedOutcome } from "./property.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const read = (p: string): string => readFileSync(path.join(ROOT, p), "utf8");
const PRACTICE = read("recipes/practice-2x/recipe.toml");
const PRACTICE_4X = read("recipes/practice-4x/recipe.toml");
const MINIMAL = read("examples/clusters/minimal.toml");
const SPARK = read("examples/clusters/spark-2x.toml");

const own = parseCluster("/etc/launcher/own.toml", SPARK.replace(/^name = .*$/m, 'name = "own"'));
assert.ok(own.cluster !== undefined, JSON.stringify(own.diagnostics));
const SCOPE: DaemonScope = { own: [own.cluster], catalogue: { find: (ref) => ({ error: `recipe "${ref}" is not one of the daemon's own` }) } };

const FRAGMENTS = ['\n[ssh]\nconfig = "/etc/passwd"\n', "\n[docker]\nrun_args = []\n", 'name = "own"\n', 'extends = "practice-2x"\n', 'extends = "../../etc/x"\n', "\n[[nodes]]\n", "[env]\n", "name = 1\n"];
const REFS = ["practice-2x", "practice-4x", "recipes/practice-2x/recipe.toml", "../x", "/etc/passwd", "~/r", ".", "", "\0", "a\\b", "__proto__"];
const FILES = ["recipes/practice-2x/recipe.toml", "recipes/practice-4x/recipe.toml", "r.toml", "/abs/r.toml", "..", ""];

const text = (seed: string): fc.Arbitrary<string> => fc.oneof(fc.constant(seed), mutatedText(seed, FRAGMENTS), fc.string({ maxLength: 60 }));
const lookup = fc.record(
  { ref: fc.constantFrom(...REFS), from: fc.constantFrom(...FILES), file: fc.constantFrom(...FILES), id: fc.constantFrom("practice-2x", "practice-4x", ""), text: fc.oneof(text(PRACTICE), text(PRACTICE_4X)) },
  { requiredKeys: ["ref", "file", "id", "text"] },
);
const submission = fc.record(
  {
    ref: fc.constantFrom(...REFS),
    cluster: fc.constantFrom("own", "other", "../own.toml", "/etc/x.toml", ""),
    lane: fc.string({ maxLength: 8 }),
    name: fc.string({ maxLength: 8 }),
    nodes: fc.constantFrom("spark1,spark2", "nope", ""),
    port: fc.constantFrom("8000", "-1", "x"),
    timeout: fc.constantFrom("10m", "x"),
    push: fc.boolean(),
    recipes: fc.array(lookup, { maxLength: 4 }),
    cluster_file: fc.record({ file: fc.constantFrom("c.toml", "own.toml", "..", "/etc/c.toml"), text: fc.oneof(text(MINIMAL), text(SPARK)) }),
  },
  { requiredKeys: ["ref"] },
);

/** A submission, or one with a field replaced by any JSON (a client's mistake, or anyone's bytes). */
const posted: fc.Arbitrary<unknown> = fc.oneof(
  submission,
  fc.tuple(submission, fc.constantFrom("ref", "cluster", "recipes", "cluster_file", "push", "extra", "__proto__"), fc.jsonValue({ maxDepth: 3 })).map(([s, key, v]) => JSON.parse(JSON.stringify({ ...s, [key]: v })) as unknown),
  fc.jsonValue({ maxDepth: 3 }),
);

test("any posted JSON decodes to a submission or to a refusal naming what is wrong", () => {
  holds("submission: decode", posted, (body) => {
    const parsed = UpSubmissionSchema.safeParse(JSON.parse(JSON.stringify(body ?? null)));
    if (!parsed.success) {
      assert.ok(parsed.error.issues.length > 0);
      for (const i of parsed.error.issues) assert.notEqual(i.message.trim(), "");
      return;
    }
    const problem = submissionPathProblem(parsed.data);
    assert.ok(problem === undefined || problem.trim() !== "");
  }, 2);
});

test("a decoded submission's cluster and recipe are a value, a UserError or positioned diagnostics", () => {
  let refused = 0;
  let booted = 0;
  holds("submission: cluster and recipe", submission, (body) => {
    const parsed = UpSubmissionSchema.safeParse(body);
    if (!parsed.success) return;
    const s = parsed.data;
    if (submissionPathProblem(s) !== undefined) return;
    if (s.cluster_file !== undefined) for (const d of clusterFileProblems(s.cluster_file.file, s.cluster_file.text)) assertPositioned(d, { [s.cluster_file.file]: s.cluster_file.text });
    const cluster = typedOutcome(() => submittedCluster(s, SCOPE));
    if ("error" in cluster) {
      assert.ok(cluster.error instanceof UserError);
      for (const d of cluster.error.diagnostics) assertPositioned(d, { [s.cluster_file?.file ?? ""]: s.cluster_file?.text ?? "" });
    }
    const outcome = typedOutcome(() => resolveRecipe(s.ref, submittedRecipes(s, SCOPE)));
    assert.ok("value" in outcome, "resolveRecipe threw");
    // The files the client sent, by their names (the longest text of a name, when two share it), and the bare reference.
    const texts: Record<string, string> = { [s.ref]: "" };
    for (const l of s.recipes ?? []) if ((texts[l.file] ?? "").length <= l.text.length) texts[l.file] = l.text;
    for (const d of outcome.value.diagnostics) assertPositioned(d, texts);
    if (outcome.value.recipe === undefined) refused++;
    else booted++;
  });
  assert.ok(refused > 0 && booted > 0, `${booted} resolved, ${refused} refused: the generator reached one verdict only`);
});

test("a sent cluster file cut short is refused at its own lines, not at the daemon's tables after it", () => {
  const outcome = typedOutcome(() => submittedCluster({ ref: "practice-2x", cluster_file: { file: "c.toml", text: "A" } }, SCOPE));
  assert.ok("error" in outcome && outcome.error instanceof UserError);
  assert.deepEqual(outcome.error.diagnostics.map((d) => d.loc), [{ file: "c.toml", line: 1, col: 2 }]);
});

reportInputsTried();
