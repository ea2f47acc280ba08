// Regenerates launcher's table of SGLang's flags (src/engine/sglang/parser-table.json), which
// judges a recipe's args where no image's own parser was read, from SGLang's own parser:
//   node --import tsx scripts/sglang-parser-table.ts --image IMAGE     an SGLang image on this machine's docker
//   node --import tsx scripts/sglang-parser-table.ts --source DIR      an SGLang checkout (its Python deps installed)
//   node --import tsx scripts/sglang-parser-table.ts --dump FILE       what the dump program printed elsewhere
// Each runs (or reads the output of) the dump program launcher runs in an image in up's preflight
// (src/engine/sglang/parser-dump.ts: ServerArgs.add_cli_args on a plain argparse parser, plugins
// loaded); --out writes elsewhere. The table in the tree was first reconstructed by hand from
// python/sglang/srt/server_args.py at sgl-project/sglang 001067ff (its "source" says so); a
// regenerated one replaces it whole. Review the diff before committing it.
import path from "node:path";
import { SGLANG_PARSER_COMMAND } from "../src/engine/sglang/parser-dump.js";
import { regenerateParserTable } from "./parser-table-main.js";

regenerateParserTable({ engine: "SGLang", serve: "sglang serve", script: "scripts/sglang-parser-table.ts", command: SGLANG_PARSER_COMMAND, defaultOut: "src/engine/sglang/parser-table.json", pythonPath: (tree) => path.join(tree, "python") });
