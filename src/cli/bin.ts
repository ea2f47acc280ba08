#!/usr/bin/env node
// The installed `launcher` command (package.json "bin"). It runs before anything else of
// launcher loads, so that:
// - on a Node.js older than package.json's engines admits, the one thing said is what to do, never
//   a crash deep in a dependency: this file and ../config/package-info.ts import only Node's own modules and
//   use nothing newer than Node 20 has, and main.js is imported only after the check;
// - later starts skip compiling: module.enableCompileCache() (Node 22.1+, doc/api/module.md
//   "Module compile cache") keeps V8's code cache of every module launcher loads on disk, in
//   $NODE_COMPILE_CACHE or else the user's own cache folder, once it is checked to be ours (compile-cache.ts);
//   NODE_DISABLE_COMPILE_CACHE=1 turns it off. It never throws: a folder it cannot write is no
//   error (it answers status FAILED) and the start goes on uncached;
// - `launcher --version` answers from package.json alone, as commander would print it.
import module from "node:module";
import { homedir } from "node:os";
import { EXIT_CLOSED_PIPE } from "./closed-pipe.js";
import { enginesNode, packageVersion, tooOldNodeLine } from "../config/package-info.js";

const tooOld = tooOldNodeLine(process.version, enginesNode());
if (tooOld !== undefined) {
  process.stderr.write(`${tooOld}\n`);
  process.exit(1);
}
const argv = process.argv.slice(2);
if (argv.length === 1 && (argv[0] === "--version" || argv[0] === "-V")) {
  // A reader that went away (`launcher --version | true`) ends it as it ends every command.
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code !== "EPIPE") throw e;
    process.exit(EXIT_CLOSED_PIPE);
  });
  process.stdout.write(`${packageVersion()}\n`);
} else {
  // Before main.js and all it imports. Typed loosely: the types of Node 20 lack it (it came in 22.1,
  // below engines' minimum, so every Node that gets here has it).
  // Imported only here: it reads launcher's own folder rules, which an old Node must never get to.
  const { compileCacheDir, ownCompileCacheDir } = await import("./compile-cache.js");
  const ours = compileCacheDir(process.env, homedir());
  const cacheDir = ours === undefined ? undefined : ownCompileCacheDir(ours);
  // NODE_COMPILE_CACHE names the user's own choice (ours is undefined): Node reads it itself.
  if (ours === undefined || cacheDir !== undefined) (module as { enableCompileCache?: (dir?: string) => unknown }).enableCompileCache?.(cacheDir);
  const { runCli } = await import("./main.js");
  await runCli(argv);
}
