import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import ts from "typescript";

/** The deploy code: the plan and memory (src/README.md's rank 4), every folder from nodes/ up to app/ (ranks 6 to 10), and the daemon (12). */
const DEPLOY = ["plan", "memory", "nodes", "transfer", "claims", "boot", "lanes", "supervise", "measure", "setup", "app", "daemon"];
const LIMIT = 80;
/** Still past the limit, to be split (each by its file and name); none may be added. */
const KNOWN = new Set<string>([]);

const SRC = path.join(import.meta.dirname, "../../src");

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(path.join(dir, e.name)) : e.name.endsWith(".ts") ? [path.join(dir, e.name)] : []));
}

/** Every function, method and arrow of a file with a body longer than LIMIT lines, as `folder/file.ts name (lines)`. */
function longFunctions(file: string): { name: string; lines: number }[] {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const found: { name: string; lines: number }[] = [];
  const line = (pos: number): number => source.getLineAndCharacterOfPosition(pos).line;
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && "body" in node && node.body !== undefined) {
      const lines = line(node.end) - line(node.getStart()) + 1;
      const named = node.name?.getText() ?? (ts.isVariableDeclaration(node.parent) ? node.parent.name.getText() : "(anonymous)");
      if (lines > LIMIT) found.push({ name: `${path.relative(SRC, file)} ${named}`, lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

test(`no function of the deploy code runs past ${LIMIT} lines, but those known to be split yet`, () => {
  const long = DEPLOY.flatMap((folder) => files(path.join(SRC, folder))).flatMap(longFunctions);
  const added = long.filter((f) => !KNOWN.has(f.name)).map((f) => `${f.name} (${f.lines} lines)`);
  assert.deepEqual(added, [], "split these into named steps (a small state object is fine)");
});
