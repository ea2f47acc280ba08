import { mkdirSync } from "node:fs";
import path from "node:path";
import { ensureFolder } from "../config/private-dir.js";

/**
 * Where the bin keeps the V8 code cache of launcher's modules (module.enableCompileCache, Node
 * 22.1+): $XDG_CACHE_HOME/launcher/node-compile-cache, else ~/.cache/launcher/node-compile-cache
 * (XDG Base Directory: a relative XDG_CACHE_HOME is ignored). Not Node's own default,
 * os.tmpdir()/node-compile-cache: in a /tmp every user may write, another user could make that
 * folder first and fill it with code this one would then run. Undefined when NODE_COMPILE_CACHE
 * names a folder: the user's own choice wins (doc/api/cli.md NODE_COMPILE_CACHE=dir).
 */
export function compileCacheDir(env: NodeJS.ProcessEnv, home: string): string | undefined {
  if (env.NODE_COMPILE_CACHE !== undefined && env.NODE_COMPILE_CACHE !== "") return undefined;
  const base = env.XDG_CACHE_HOME && path.isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : path.join(home, ".cache");
  return path.join(base, "launcher", "node-compile-cache");
}

/**
 * The folder made ours (0700, owned by us, not a link, its parent closed to others: the rules of
 * every private folder launcher makes, src/config/private-dir.ts), or undefined when it cannot be:
 * the start then goes on uncached. Node itself checks none of this, and loops on a folder it cannot
 * make (XDG_CACHE_HOME=/proc/sys spins at 100 % CPU in Node 24.22's mkdir loop).
 */
export function ownCompileCacheDir(dir: string): string | undefined {
  const launcherDir = path.dirname(dir);
  try {
    mkdirSync(path.dirname(launcherDir), { recursive: true });
    ensureFolder(launcherDir, "the compile cache", "private");
    return ensureFolder(dir, "the compile cache", "private");
  } catch {
    return undefined;
  }
}
