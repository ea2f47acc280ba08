/**
 * An --import hook that names each npm package the process loads, once, on stderr. The resolve
 * hook runs on Node's hooks thread (module.register), so it writes with fs.writeSync on fd 2: a
 * process.stderr.write there is handed to the main thread and may be lost when the CLI exits at
 * once (a short command such as `export systemd`), which made a test read only "tsx".
 */
export const LOADED_HOOK = `data:text/javascript,${encodeURIComponent(`
import { register } from "node:module";
register("data:text/javascript," + encodeURIComponent(\`
import { writeSync } from "node:fs";
const seen = new Set();
export async function resolve(s, c, next) {
  const r = await next(s, c);
  const m = /node_modules\\\\/((?:@[^/]+\\\\/)?[^/]+)/.exec(r.url);
  if (m && !seen.has(m[1])) { seen.add(m[1]); writeSync(2, "loaded " + m[1] + "\\\\n"); }
  return r;
}\`));
`)}`;

/** The packages a run's stderr says it loaded (LOADED_HOOK's lines). */
export const loadedPackages = (stderr: string): string[] => [...stderr.matchAll(/^loaded (\S+)$/gm)].map((m) => m[1] ?? "");
