/**
 * A node:test reporter that prints, once the run ends, the slowest test FILES and their times
 * (one line each), for `npm run test:all`: per-file times decide what to make faster.
 *
 * With process isolation (the default), the runner runs each file as a test of its own: its
 * `test:complete` (nesting 0, `file` set) lasts from the child's spawn to its exit, module load and
 * hooks included, so it is the longest of that file's nesting-0 completions; the tests' own are
 * shorter. The last `test:summary`, without `file`, is the whole run (Node 24 doc/api/test.md,
 * "Event: 'test:complete'", "Event: 'test:summary'"; checked with a file that sleeps in its body,
 * its before() and its test: 1.69 s for the file against 0.74 s for its test). Use it beside the
 * usual reporter (with LAUNCHER_FILE_TIMES=FILE, runs add their times to FILE and print the
 * table of all of them):
 *   node --test --test-reporter=spec --test-reporter-destination=stdout \
 *     --test-reporter=./test/file-times.ts --test-reporter-destination=stdout FILES
 */
import { appendFileSync, readFileSync } from "node:fs";
import path from "node:path";

interface Completed {
  readonly file?: string;
  readonly nesting: number;
  readonly details?: { readonly duration_ms?: number };
}

/** How many files the table lists: $LAUNCHER_SLOWEST_FILES, default 10. */
const TOP = Math.max(1, Number(process.env.LAUNCHER_SLOWEST_FILES ?? "10") || 10);

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** The table's lines: the `top` slowest files, slowest first, then the whole run. Pure, for its test. */
export function slowestFiles(files: ReadonlyMap<string, number>, runMs: number | undefined, top: number, cwd: string): string[] {
  const rows = [...files].sort((a, b) => b[1] - a[1]).slice(0, top);
  const lines = [`slowest ${rows.length} of ${files.size} test files:`];
  for (const [file, ms] of rows) lines.push(`  ${seconds(ms).padStart(8)}  ${path.relative(cwd, file)}`);
  const sum = [...files.values()].reduce((a, b) => a + b, 0);
  lines.push(`  files' own times add up to ${seconds(sum)}${runMs === undefined ? "" : `; the run took ${seconds(runMs)}`}`);
  return lines;
}

export default async function* fileTimes(source: AsyncIterable<{ type: string; data: unknown }>): AsyncGenerator<string> {
  const files = new Map<string, number>();
  let runMs: number | undefined;
  for await (const event of source) {
    if (event.type === "test:summary") {
      const s = event.data as { file?: string; duration_ms: number };
      if (s.file === undefined) runMs = s.duration_ms;
      continue;
    }
    if (event.type !== "test:complete") continue;
    const c = event.data as Completed;
    const ms = c.details?.duration_ms;
    if (c.file === undefined || c.nesting !== 0 || ms === undefined) continue;
    files.set(c.file, Math.max(files.get(c.file) ?? 0, ms));
  }
  if (files.size === 0) return;
  const log = process.env.LAUNCHER_FILE_TIMES;
  if (log === undefined || log === "") {
    yield `\n${slowestFiles(files, runMs, TOP, process.cwd()).join("\n")}\n`;
    return;
  }
  // Several runs (npm run test:all: the unit tier's two, then the rig's) share one log: each
  // adds its files, and prints the table of all the files so far.
  appendFileSync(log, [...files].map(([file, ms]) => `${ms}\t${file}\n`).join(""));
  yield `\n${slowestFiles(readTimes(readFileSync(log, "utf8")), undefined, TOP, process.cwd()).join("\n")}\n`;
}

/** The log's "MS<tab>FILE" lines as a map (a file twice: its times add up). Pure. */
export function readTimes(text: string): Map<string, number> {
  const files = new Map<string, number>();
  for (const line of text.split("\n")) {
    const tab = line.indexOf("\t");
    const ms = Number(line.slice(0, tab));
    if (tab > 0 && Number.isFinite(ms)) files.set(line.slice(tab + 1), (files.get(line.slice(tab + 1)) ?? 0) + ms);
  }
  return files;
}
