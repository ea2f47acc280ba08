// What a process of the CLI loaded: the one --import hook the tests run it with, and readers of
// what the hook printed.

/**
 * An --import hook that names, on stderr, each module the process resolves ("loaded URL", once
 * each) and, as it exits, each of Node's own internal modules it loaded ("internal NAME", from
 * process.moduleLoadList). Synchronous hooks (module.registerHooks, Node 22.15 and 23.5:
 * doc/api/module.md "Customization hooks") run in the process itself, so they see what tsx
 * resolves too; they write with fs.writeSync, so that a command that exits at once (`export
 * systemd`) loses no line.
 */
export const LOADED_HOOK = `data:text/javascript,${encodeURIComponent(`
import { registerHooks } from "node:module";
import { writeSync } from "node:fs";
const seen = new Set();
registerHooks({ resolve(s, c, next) { const r = next(s, c); if (!seen.has(r.url)) { seen.add(r.url); writeSync(2, "loaded " + r.url + "\\n"); } return r; } });
process.on("exit", () => writeSync(2, process.moduleLoadList.map((m) => "internal " + m + "\\n").join("")));
`)}`;

/** The URLs of the modules a run resolved (LOADED_HOOK's lines on its stderr). */
export const loadedUrls = (stderr: string): string[] => [...stderr.matchAll(/^loaded (\S+)$/gm)].map((m) => m[1] ?? "");

/** The npm packages a run loaded, each once, in the order it first loaded them. */
export const loadedPackages = (stderr: string): string[] => [
  ...new Set(loadedUrls(stderr).flatMap((u) => /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(u)?.[1] ?? [])),
];

/** Node's own modules a run loaded, as process.moduleLoadList names them ("NativeModule fs"). */
export const loadedInternals = (stderr: string): Set<string> => new Set([...stderr.matchAll(/^internal (.+)$/gm)].map((m) => m[1] ?? ""));
