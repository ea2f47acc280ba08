import { existsSync } from "node:fs";
import path from "node:path";
import type { Command } from "commander";
import { hasErrors, type Diagnostic } from "../config/diagnostic.js";
import { gpusPerNode } from "../app/lookup.js";
import { loadCluster, imageRoots, resolveRecipeRef } from "../app/this-process.js";
import { imageFolders } from "../plan/image-folders.js";
import type { Output } from "../app/output.js";
import { UserError } from "../config/errors.js";
import { clusterOption, jsonOption, outputOption } from "./options.js";

export function registerValidate(program: Command, io: Output): void {
  program
    .command("validate")
    .description("check recipes: every problem of a file at once, as path:line:col")
    .argument("<recipe...>", "recipe name, folder or recipe.toml")
    .addOption(clusterOption())
    .addOption(jsonOption("print the findings as JSON")).addOption(outputOption())
    .action((refs: string[], opts: { cluster?: string; json?: boolean }) => {
      const gpus = opts.cluster === undefined ? undefined : gpusPerNode(loadCluster(opts.cluster));
      const all: Diagnostic[] = [];
      // Only roots that exist are named where a docker_image_dir finds no folder.
      const roots = imageRoots().filter((r) => existsSync(r));
      const folders = { roots: [...new Set(roots.map((r) => path.relative(process.cwd(), r) || r))], names: imageFolders(roots).map((f) => f.name) };
      const results = refs.map((ref) => {
        const r = resolveRecipeRef(ref, gpus, { imageFolders: folders });
        all.push(...r.diagnostics);
        return { ref, file: r.recipe?.file, ok: !hasErrors(r.diagnostics), diagnostics: r.diagnostics };
      });
      if (opts.json) {
        io.json({ ok: !hasErrors(all), recipes: results });
      } else {
        io.diagnostics(all);
        for (const r of results) if (r.ok) io.out(`${r.file ?? r.ref}: ok`);
      }
      // With --json the results above carry every diagnostic: exit 1 without a second JSON document.
      if (hasErrors(all) && opts.json) process.exitCode = 1;
      else if (hasErrors(all)) {
        const bad = results.filter((r) => !r.ok).map((r) => r.ref);
        throw new UserError(`${bad.length} of ${refs.length} recipe${refs.length === 1 ? "" : "s"} invalid: ${bad.join(", ")}`);
      }
    });
}
