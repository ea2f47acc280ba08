import type { Command } from "commander";
import { diffRecipes, formatChanges } from "../recipe/diff.js";
import { loadRecipe } from "../app/this-process.js";
import type { Output } from "../app/output.js";
import { jsonOption, outputOption } from "./options.js";

export function registerDiff(program: Command, io: Output): void {
  program
    .command("diff")
    .description("compare two resolved recipes: fields, args flag by flag (JSON values key by key), env by key, mounts by container path")
    .argument("<a>", "first recipe")
    .argument("<b>", "second recipe")
    .addOption(jsonOption("print the changes as JSON")).addOption(outputOption())
    .option("--exit-code", "exit with status 1 when the recipes differ")
    .action((a: string, b: string, opts: { json?: boolean; exitCode?: boolean }) => {
      const warn = (ds: Parameters<Output["diagnostics"]>[0]): void => io.diagnostics(ds);
      const ra = loadRecipe(a, warn);
      const rb = loadRecipe(b, warn);
      const changes = diffRecipes(ra, rb);
      if (opts.json) {
        io.json({ a: ra.file, b: rb.file, changes });
      } else {
        io.out(`--- ${ra.id} (${ra.file})`);
        io.out(`+++ ${rb.id} (${rb.file})`);
        const lines = formatChanges(changes);
        io.out(lines.length === 0 ? "(no differences)" : lines.join("\n"));
      }
      if (opts.exitCode && changes.length > 0) process.exitCode = 1;
    });
}
