import { DUMP_FORMAT, dumpProgramTail } from "../argparse-dump.js";

/** The first line of the dump program: the practice engine's python3 stand-in knows it by this line. */
export const SGLANG_DUMP_FIRST_LINE = `# launcher: dump the argument parser of sglang serve (format ${DUMP_FORMAT})`;

/*
 * The program launcher runs with the image's own Python to describe SGLang's argument parser
 * (src/engine/argparse-dump.ts reads what it prints). It builds the parser the way SGLang's
 * launch does and prints every action; it starts no server and needs no GPU (sgl-project/sglang
 * 001067ff):
 * - python/sglang/launch_server.py calls sglang.srt.plugins.load_plugins() (a plugin may add
 *   flags), then prepare_server_args(sys.argv[1:]);
 * - python/sglang/srt/server_args.py prepare_server_args builds a plain
 *   argparse.ArgumentParser(prog="sglang serve") (allow_abbrev left on: a unique prefix is the
 *   whole flag) and fills it with ServerArgs.add_cli_args(parser), then parse_args (not
 *   parse_known_args: an unknown flag stops it with "unrecognized arguments", exit 2);
 * - older releases have no sglang.srt.plugins: its absence is no error here.
 * - SGLang's logger may write to stdout on import, so the description follows a sentinel line, in
 *   one write. Type callables are named with the callables their closures wrap, as the vLLM
 *   program does (../vllm/parser-dump.ts): json.loads is `loads`.
 * The Python that prints the actions is every engine's (../argparse-dump.ts dumpProgramTail).
 */
const PROGRAM = `${SGLANG_DUMP_FIRST_LINE}
import sys, json, argparse
sys.argv = ["launcher-parser-dump"]
try:
    from sglang.srt.plugins import load_plugins
    load_plugins()
except ImportError:
    pass
from sglang.srt.server_args import ServerArgs
import sglang
parser = argparse.ArgumentParser(prog="sglang serve")
ServerArgs.add_cli_args(parser)
${dumpProgramTail("sglang")}`;

/** Run in the image, its first word replacing the ENTRYPOINT (SGLang's images have their own). */
export const SGLANG_PARSER_COMMAND: readonly string[] = ["python3", "-c", PROGRAM];
