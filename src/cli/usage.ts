import type { Command } from "commander";

/** What a usage error prints: one line saying what is wrong, and where to look. */
export interface UsageError {
  readonly line: string;
  readonly hint: string;
}

/** `launcher plan`, `launcher images push`: the words that run `command`. */
export function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c !== null; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

/**
 * Commander's error text ("error: unknown option '--jsn'\n(Did you mean --json?)") as one line
 * with its suggestion, and a hint naming the help of the command that refused it: the whole help
 * page after every typo buries the one line that matters.
 */
export function usageError(commanderMessage: string, command: Command): UsageError {
  const [first = "", ...rest] = commanderMessage.trim().split("\n");
  const what = first.replace(/^error: /, "");
  const suggestion = rest.map((l) => /^\(Did you mean (.+)\?\)$/.exec(l.trim())?.[1]).find((s) => s !== undefined);
  const path = commandPath(command);
  const hint = command.parent === null && /^unknown command/.test(what) ? `\`${path} --help\` lists the commands` : `\`${path} --help\` shows what it takes`;
  return { line: `${command.parent === null ? "launcher" : path}: ${what}${suggestion === undefined ? "" : ` (did you mean ${suggestion}?)`}`, hint };
}

/** Every command under `root`, itself included. */
export function allCommands(root: Command): Command[] {
  return [root, ...root.commands.flatMap((c) => allCommands(c))];
}

/**
 * Makes every command print its usage errors as `usageError` says (after all are registered);
 * each is also handed to `seen`, for the JSON answer of a command line that asked for one.
 */
export function oneLineUsageErrors(root: Command, seen: (u: UsageError) => void = () => undefined): void {
  for (const command of allCommands(root)) {
    command.showHelpAfterError(false).configureOutput({
      outputError: (text, write) => {
        const u = usageError(text, command);
        seen(u);
        write(`${u.line}\n  hint: ${u.hint}\n`);
      },
    });
  }
}

/**
 * Whether a command line asks for JSON (`--json`, `-o json`, `-ojson`, `--output json`,
 * `--output=json`), read from the words themselves: a usage error stops commander before it has
 * parsed the options, yet a script that asked for JSON still reads its error as JSON.
 */
export function asksForJson(argv: readonly string[]): boolean {
  return argv.some((w, i) => w === "--json" || w === "-ojson" || w === "--output=json" || ((w === "-o" || w === "--output") && argv[i + 1] === "json"));
}
