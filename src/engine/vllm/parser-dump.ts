import { DUMP_FORMAT, dumpProgramTail } from "../argparse-dump.js";

/*
 * The program launcher runs with the image's own Python to describe `vllm serve`'s argument
 * parser (src/engine/argparse-dump.ts reads what it prints). It builds the parser the way
 * vllm/entrypoints/cli/serve.py does (make_arg_parser on a FlexibleArgumentParser) and prints
 * every action; it starts no engine and needs no GPU: vLLM's docs build renders the same parser
 * on CPU-only machines (vllm/engine/arg_utils.py NEEDS_HELP / mkdocs), and current_platform
 * resolves lazily, falling back with a warning where no GPU is found.
 * - make_arg_parser is in vllm/entrypoints/launchers/cli_args.py since mid-2026, before that in
 *   vllm/entrypoints/openai/cli_args.py; FlexibleArgumentParser in vllm/utils/argparse_utils.py
 *   since about October 2025, before that in vllm/utils/__init__.py: both are tried.
 * - sys.argv holds no "serve" and no "--help": arg_utils.py leaves --model out when both are in
 *   argv, and reads the help texts (slow, unused here) when --help is.
 * - vllm.plugins.load_general_plugins() first, as serve does, so a plugin's flags are described.
 * - vLLM's logger writes to stdout, so the description follows a sentinel line, in one write.
 * - Type callables are named with the callables their closures wrap (parse_type(json.loads) is
 *   `_parse_type`, `loads`): what tells a JSON flag (./flags.ts JSON_TYPES).
 */
const PROGRAM = `# launcher: dump the argument parser of vllm serve (format ${DUMP_FORMAT})
import sys, json
sys.argv = ["launcher-parser-dump"]
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
try:
    from vllm.plugins import load_general_plugins
    load_general_plugins()
except Exception:
    pass
import vllm
parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
${dumpProgramTail("vllm")}`;

/** Run in the image, its first word replacing the ENTRYPOINT (NGC images have their own). */
export const VLLM_PARSER_COMMAND: readonly string[] = ["python3", "-c", PROGRAM];
