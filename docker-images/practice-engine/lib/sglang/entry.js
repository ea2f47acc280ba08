'use strict';
// The Python programs of SGLang's that the practice engine's python3 stand-in (bin/python3) runs
// as the SGLang persona (a stand-in, not SGLang):
// - `python3 -m sglang.launch_server ARGS` (python/sglang/launch_server.py), which launcher runs on
//   ranks above 0 (no key there);
// - launcher's launch program (src/engine/sglang/command.ts LAUNCH_PROGRAM, known by its first
//   line): the same, with `--api-key KEY` added from SGLANG_API_KEY when it is set and not empty;
// - launcher's version check (src/engine/sglang/image.ts): prints sglang.__version__
//   (PRACTICE_SGLANG_VERSION, else 0.5.5);
// - launcher's parser dump (src/engine/sglang/parser-dump.ts, known by its first line): the
//   sentinel line, then the persona's own option table as a real image's dump describes SGLang's
//   parser (lib/sglang/args.js describeSglangParser), exit 0.

const LAUNCH_FIRST_LINE = '# launcher: run sglang.launch_server with the API key from the env (format 1)';
const VERSION_PROGRAM = 'import sglang; print(sglang.__version__)';
const DUMP_FIRST_LINE = '# launcher: dump the argument parser of sglang serve (format 1)';
const DUMP_SENTINEL = '@@LAUNCHER-PARSER-DUMP@@';

const versionOf = (env) => (env.PRACTICE_SGLANG_VERSION ?? '').trim() || '0.5.5';

/** Written before the process exits: pipe writes may be asynchronous (Node.js docs, process, "A note on process I/O"). */
function dumpParser(env) {
  const text = `${DUMP_SENTINEL}\n${JSON.stringify(require('./args.js').describeSglangParser(versionOf(env)))}\n`;
  return new Promise((resolve) => process.stdout.write(text, () => resolve(0)));
}

/** A promise that never settles while the persona runs (it exits itself), or undefined: not SGLang's program. */
function sglangProgram(flag, program, rest, env) {
  const run = (argv) => {
    require('./serve.js').runSglang(argv, env).catch((e) => {
      process.stderr.write(`${e && e.stack ? e.stack : e}\n`);
      process.exit(1);
    });
    return new Promise(() => {});
  };
  if (flag === '-m' && program === 'sglang.launch_server') return run(rest);
  if (flag === '-c' && String(program).split('\n')[0] === LAUNCH_FIRST_LINE) {
    const key = env.SGLANG_API_KEY;
    return run([...rest, ...(key ? ['--api-key', key] : [])]);
  }
  if (flag === '-c' && program === VERSION_PROGRAM) {
    process.stdout.write(`${versionOf(env)}\n`);
    return Promise.resolve(0);
  }
  if (flag === '-c' && String(program).split('\n')[0] === DUMP_FIRST_LINE) return dumpParser(env);
  return undefined;
}

module.exports = { sglangProgram, LAUNCH_FIRST_LINE, VERSION_PROGRAM, DUMP_FIRST_LINE };
