import { writeFileSync } from "node:fs";
import type { Command } from "commander";
import { UserError } from "../config/errors.js";
import { compare } from "../compare/compare.js";
import { resolveSides } from "../compare/resolve.js";
import { plotSvg } from "../compare/svg.js";
import { markdownTable, textTable } from "../compare/table.js";
import { withStore } from "./load.js";
import type { Output } from "./output.js";
import { jsonOption, outputOption } from "./options.js";

interface CompareFlags {
  markdown?: boolean;
  plot?: string;
  json?: boolean;
}

export function registerCompare(program: Command, io: Output): void {
  program
    .command("compare")
    .description("compare two recipes, deployments, lanes or stored runs: boot figures, bench speed with spread, eval answers; a difference is called only beyond the spread")
    .argument("<a>", "recipe, deployment, lane or stored run id (series/ID, run/ID, deployment/NAME, lane/NAME, recipe/NAME pick the kind)")
    .argument("<b>", "the other side, named the same ways")
    .option("--markdown", "print the table as markdown, for a recipe comment or an issue")
    .option("--plot <file.svg>", "also draw throughput and latency against concurrency for both sides, with spread, into this SVG file")
    .addOption(jsonOption("print the comparison as JSON")).addOption(outputOption())
    .action((a: string, b: string, opts: CompareFlags) =>
      withStore(async (store) => {
        if (opts.markdown && opts.json) throw new UserError("--markdown and --json each print the whole comparison: pass one of them");
        const c = compare(...resolveSides(store, a, b));
        if (opts.plot !== undefined) {
          const file = opts.plot;
          const svg = await plotSvg(c);
          try {
            writeFileSync(file, svg);
          } catch (e) {
            throw new UserError(`--plot ${file}: cannot write it (${(e as NodeJS.ErrnoException).code ?? String(e)})`, "name a file in a folder that exists and that you may write");
          }
        }
        if (opts.json) io.json(c);
        else io.out(opts.markdown ? markdownTable(c) : textTable(c));
      }),
    );
}
