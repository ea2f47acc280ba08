import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import type { Command } from "commander";
import { EXIT_BUG, EXIT_USER } from "../../src/config/errors.js";
import { EXIT_CODES } from "../../src/cli/interrupts.js";

const README = "README.md";
const lines = readFileSync(README, "utf8").split("\n");

/**
 * The CLI's own program. src/cli/main.ts runs the CLI when it is imported (it is the bin), so it
 * is imported with the argv of `launcher --version`: that run prints the version and sets the
 * exit code 0, both undone here.
 */
async function cli(): Promise<{ program: Command; exitClosedPipe: number }> {
  const argv = process.argv;
  const write = process.stdout.write;
  process.argv = [argv[0] ?? "node", "launcher", "--version"];
  // Only the version line is held back: the test runner reports through this stream too.
  process.stdout.write = function (this: typeof process.stdout, chunk: unknown, ...rest: unknown[]): boolean {
    if (typeof chunk === "string" && /^\d+\.\d+\.\d+\S*\n$/.test(chunk)) return true;
    return (write as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
  } as typeof process.stdout.write;
  try {
    const main = await import("../../src/cli/main.js");
    return { program: main.buildProgram(), exitClosedPipe: main.EXIT_CLOSED_PIPE };
  } finally {
    process.argv = argv;
    process.stdout.write = write;
    process.exitCode = undefined;
  }
}

/** Every command and subcommand, as `images build` is typed. */
function commands(program: Command): { path: string; command: Command }[] {
  const out: { path: string; command: Command }[] = [];
  const walk = (c: Command, prefix: string[]): void => {
    for (const sub of c.commands) {
      const path = [...prefix, sub.name()];
      out.push({ path: path.join(" "), command: sub });
      walk(sub, path);
    }
  };
  walk(program, []);
  return out;
}

interface Row {
  /** 1-based line in README.md. */
  readonly line: number;
  /** The command as typed: `images build`. */
  readonly path: string;
  /** Every `-x` / `--long` word of the usage. */
  readonly flags: ReadonlySet<string>;
  readonly usage: string;
}

/** The rows of the table that follows `## Commands`: its lines up to the first line that is not a table line. */
function commandTable(): { rows: Row[]; end: number; stray: Row[] } {
  const heading = lines.indexOf("## Commands");
  assert.ok(heading >= 0, `${README} has no "## Commands" section`);
  const start = lines.findIndex((l, i) => i > heading && l.startsWith("|"));
  let end = start;
  while (lines[end]?.startsWith("|")) end++;
  const nextSection = lines.findIndex((l, i) => i > heading && l.startsWith("## "));
  const parse = (from: number, to: number): Row[] => {
    const rows: Row[] = [];
    for (let i = from; i < to; i++) {
      // A row's first cell opens with the usage in backticks: | `launcher images build RECIPE [--local]` | ... |
      const usage = /^\|\s*`(launcher [^`]*)`/.exec(lines[i] ?? "")?.[1];
      if (usage === undefined) continue;
      const words = usage.split(/\s+/).slice(1);
      const path: string[] = [];
      for (const w of words) {
        // A command's name may hold digits (`export k8s`); a usage's operands are upper case.
        if (!/^[a-z][a-z0-9-]*$/.test(w)) break;
        path.push(w);
      }
      const flags = new Set([...usage.matchAll(/(?<![\w-])(--?[A-Za-z][\w-]*)/g)].map((m) => m[1] ?? ""));
      rows.push({ line: i + 1, path: path.join(" "), flags, usage });
    }
    return rows;
  };
  // Rows after a blank line are no longer part of the table when Markdown renders it.
  return { rows: parse(start, end), end: end + 1, stray: parse(end, nextSection < 0 ? lines.length : nextSection) };
}

/** The flags the paragraph "Common to all commands: ..." (just before the table) names. */
function sharedFlags(): Set<string> {
  const heading = lines.indexOf("## Commands");
  const start = lines.findIndex((l, i) => i > heading && l.startsWith("Common to all commands:"));
  if (start < 0) return new Set();
  let end = start;
  while ((lines[end] ?? "").trim() !== "") end++;
  const text = lines.slice(start, end).join(" ");
  return new Set([...text.matchAll(/(?<![\w-])(--?[A-Za-z][\w-]*)/g)].map((m) => m[1] ?? ""));
}

test("README: the commands table is one table with a row for every command, listing every option the CLI takes and no other", async () => {
  const { program } = await cli();
  const { rows, end, stray } = commandTable();
  const shared = sharedFlags();
  const problems: string[] = [];
  for (const { path, command } of commands(program)) {
    // A group such as `launcher cluster` (subcommands only, no options of its own) is its subcommands' rows.
    if (command.commands.length > 0 && command.options.filter((o) => !o.hidden).length === 0) continue;
    const split = stray.find((r) => r.path === path);
    const row = rows.find((r) => r.path === path) ?? split;
    if (row === undefined) {
      problems.push(`${README}: the commands table has no row for \`launcher ${path}\` (${command.description()}): add one whose first cell is \`launcher ${path} ...\` listing its options`);
      continue;
    }
    if (row === split) {
      problems.push(`${README}:${row.line}: the row of \`launcher ${path}\` is outside the commands table, which ends at line ${end} (a blank line or other text breaks a Markdown table)`);
    }
    for (const option of command.options) {
      if (option.hidden) continue;
      const spellings = [option.long, option.short].filter((f): f is string => f !== undefined);
      // The row names the option; a second spelling of a shared option (-c, -o) may be said once, in the paragraph above the table.
      if (!spellings.some((f) => row.flags.has(f))) {
        problems.push(`${README}:${row.line}: the row of \`launcher ${path}\` lacks ${spellings.join(" / ")} (the CLI's "${option.flags}": ${option.description})`);
        continue;
      }
      for (const flag of spellings) {
        if (!row.flags.has(flag) && !shared.has(flag)) problems.push(`${README}:${row.line}: the row of \`launcher ${path}\` lacks ${flag} (the CLI's "${option.flags}"), and the paragraph of options common to all commands does not name it`);
      }
    }
    const known = new Set(command.options.flatMap((o) => [o.long, o.short].filter((f): f is string => f !== undefined)));
    for (const flag of row.flags) {
      if (!known.has(flag)) problems.push(`${README}:${row.line}: the row of \`launcher ${path}\` names ${flag}, which \`launcher ${path}\` does not take`);
    }
  }
  const paths = new Set(commands(program).map((c) => c.path));
  for (const row of [...rows, ...stray]) {
    if (!paths.has(row.path)) problems.push(`${README}:${row.line}: \`launcher ${row.path}\` is no command of the CLI`);
  }
  assert.deepEqual(problems, []);
});

test("README: the exit statuses list every code launcher exits with (signals included)", async () => {
  const { exitClosedPipe } = await cli();
  const start = lines.findIndex((l) => l.startsWith("Exit status:"));
  assert.ok(start >= 0, `${README} has no "Exit status:" paragraph`);
  let stop = start;
  while (stop < lines.length && (lines[stop] ?? "").trim() !== "") stop++;
  const text = lines.slice(start, stop).join(" ");
  const codes = [0, EXIT_USER, EXIT_BUG, exitClosedPipe, ...Object.values(EXIT_CODES)];
  const missing = codes.filter((c) => !new RegExp(`(?<!\\d)${c}(?!\\d)`).test(text));
  assert.deepEqual(missing, [], `${README}:${start + 1}: the exit statuses do not name ${missing.join(", ")}`);
});

test("README: lanes are explained before a command uses one", () => {
  const firstUse = lines.findIndex((l) => /--lane\b|\blanes?\b/i.test(l));
  const definition = lines.findIndex((l) => /\bA lane is\b/.test(l));
  assert.ok(definition >= 0, `${README} never says what a lane is ("A lane is ...")`);
  // The paragraph that defines lanes is the first to mention them.
  let paragraph = definition;
  while (paragraph > 0 && (lines[paragraph - 1] ?? "").trim() !== "") paragraph--;
  assert.ok(firstUse >= paragraph, `${README}:${firstUse + 1} uses lanes before line ${definition + 1} says what a lane is`);
});
