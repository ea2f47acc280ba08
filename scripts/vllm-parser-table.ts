// Regenerates launcher's table of vLLM's flags (src/engine/vllm/parser-table.json), which judges a
// recipe's args where no image's own parser was read, from vLLM's own parser:
//   node --import tsx scripts/vllm-parser-table.ts --image IMAGE     a vLLM image on this machine's docker
//   node --import tsx scripts/vllm-parser-table.ts --source DIR      a vLLM source tree (its Python deps installed)
//   node --import tsx scripts/vllm-parser-table.ts --dump FILE       what the dump program printed elsewhere
// Each runs (or read the output of) the dump program launcher runs in an image in up's preflight
// (src/engine/vllm/parser-dump.ts); --out writes elsewhere. Review the diff before committing it.
import { VLLM_PARSER_COMMAND } from "../src/engine/vllm/parser-dump.js";
import { regenerateParserTable } from "./parser-table-main.js";

regenerateParserTable({ engine: "vLLM", serve: "vllm serve", script: "scripts/vllm-parser-table.ts", command: VLLM_PARSER_COMMAND, defaultOut: "src/engine/vllm/parser-table.json", pythonPath: (tree) => tree });
