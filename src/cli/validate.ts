import { existsSync } from "node:fs";
import path from "node:path";
import type { Command } from "commander";
import { hasErrors } from "../config/diagnostic.js";
import { gpusPerNode } from "../app/lookup.js";
import { loadCluster, imageRoots, localRecipes } from "../app/this-process.js";
import { imageFolders } from "../plan/image-folders.js";
import type { Output } from "../app/output.js";
import { UserError } from "../config/errors.js";
import { judgedLines, validateRecipes } from "../app/validate.js";
import { clusterOption, jsonOption, outputOption } from "./options.js";

export function registerValidate(program: Command, io: Output): void {
  program
    .command("validate")
    .description("check recipes: every problem of a file at once, as path:line:col")
    .argument("<recipe...>", "recipe name, folder or recipe.toml")
    .addOption(clusterOption())
    .option("--image <image>", "judge the args by this image's own engine parser (read with this machine's docker, kept by image ID)")
    .addOption(jsonOption("print the findings as JSON")).addOption(outputOption())
    .action(async (refs: string[], opts: { cluster?: string; json?: boolean; image?: string }) => {
      const gpus = opts.cluster === undefined ? undefined : gpusPerNode(loadCluster(opts.cluster));
      // Only roots that exist are named where a docker_image_dir finds no folder.
      const roots = imageRoots().filter((r) => existsSync(r));
      const folders = { roots: [...new Set(roots.map((r) => path.relative(process.cwd(), r) || r))], names: imageFolders(roots).map((f) => f.name) };
      const results = await validateRecipes(refs, localRecipes(), {
        ...(gpus === undefined ? {} : { gpusPerNode: gpus }),
        imageFolders: folders,
        ...(opts.image === undefined ? {} : { image: { name: opts.image, docker: localDocker } }),
      });
      const all = results.flatMap((r) => r.diagnostics);
      if (opts.json) {
        io.json({ ok: !hasErrors(all), recipes: results });
      } else {
        io.diagnostics(all);
        for (const r of results) if (r.ok) io.out(`${r.file ?? r.ref}: ok`);
        for (const line of judgedLines(results)) io.err(line);
      }
      // With --json the results above carry every diagnostic: exit 1 without a second JSON document.
      if (hasErrors(all) && opts.json) process.exitCode = 1;
      else if (hasErrors(all)) {
        const bad = results.filter((r) => !r.ok).map((r) => r.ref);
        throw new UserError(`${bad.length} of ${refs.length} recipe${refs.length === 1 ? "" : "s"} invalid: ${bad.join(", ")}`);
      }
    });
}

/** This machine's docker, and the store's image facts (kept by image ID): loaded only for --image. */
async function localDocker() {
  const [{ SshDocker }, { localTransport }, { openStore }] = await Promise.all([import("../remote/docker.js"), import("../remote/local.js"), import("../app/host.js")]);
  const store = openStore();
  const now = new Date().toISOString();
  return { docker: new SshDocker(localTransport("this machine")), cache: { get: (id: string) => store.imageFacts(id), put: (id: string, facts: Parameters<typeof store.saveImageFacts>[1]) => store.saveImageFacts(id, facts, now) } };
}
