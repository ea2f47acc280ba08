import type { Command } from "commander";
import type { Output } from "../app/output.js";
import type { DaemonTarget } from "../daemon/client.js";
import { daemonOption, readerTarget } from "./daemon-target.js";
import { jsonOption, outputOption } from "./options.js";

/** How long asking the daemon for a code may take. */
const ASK_WAIT_MS = 10_000;
/** A code's path as the daemon gives it; anything else is not made into a URL (nor opened). */
const CODE_PATH = /^\/\?code=[A-Za-z0-9_-]{22,128}$/;

/** The sign-in link: the daemon's URL (an origin, src/daemon/client.ts checkDaemonUrl) and the code's path; undefined: the path is not a code's. */
export function signInLink(daemonUrl: string, urlPath: string): string | undefined {
  return CODE_PATH.test(urlPath) ? `${daemonUrl}${urlPath}` : undefined;
}

/** Whether to look for a browser: not when told not to, and only with a display (X11 or Wayland) at hand. */
export function wantsBrowser(open: boolean, vars: Readonly<Record<string, string | undefined>>): boolean {
  return open && [vars.DISPLAY, vars.WAYLAND_DISPLAY].some((v) => v !== undefined && v !== "");
}

/** xdg-open's path on $PATH, when there is one this user may run. */
async function xdgOpen(pathVar: string | undefined): Promise<string | undefined> {
  const [{ accessSync, constants }, path] = await Promise.all([import("node:fs"), import("node:path")]);
  for (const dir of (pathVar ?? "").split(path.delimiter).filter((d) => path.isAbsolute(d))) {
    const file = path.join(dir, "xdg-open");
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // Not here: the next folder.
    }
  }
  return undefined;
}

/** A one-time code from the daemon, as its link (the demo prints one too). */
export async function askLink(target: DaemonTarget): Promise<{ url: string; expires_at: string }> {
  const [{ call }, { READ_KEY_HINT }, { SESSION_ROUTES, SignInCodeSchema }, { UserError }] = await Promise.all([
    import("../daemon/client.js"),
    import("../daemon/read-client.js"),
    import("../contract/read-api.js"),
    import("../config/errors.js"),
  ]);
  const res = await call(target, "POST", SESSION_ROUTES.codes, undefined, AbortSignal.timeout(ASK_WAIT_MS), [], READ_KEY_HINT);
  const answer = SignInCodeSchema.safeParse(await res.json().catch(() => undefined));
  const url = answer.success ? signInLink(target.url, answer.data.url_path) : undefined;
  if (!answer.success || url === undefined) throw new UserError(`the daemon at ${target.url} answered a sign-in code in a shape this launcher does not know`, "run the same launcher version on both sides");
  return { url, expires_at: answer.data.expires_at };
}

/** An HTML page that sends the browser on to `url`, in a fresh folder of mode 0700, itself 0600 (mkdtemp makes the folder so). */
async function redirectFile(url: string): Promise<string> {
  const [{ mkdtempSync, writeFileSync }, { tmpdir }, path] = await Promise.all([import("node:fs"), import("node:os"), import("node:path")]);
  const file = path.join(mkdtempSync(path.join(tmpdir(), "launcher-dashboard-")), "sign-in.html");
  // The URL is the daemon's origin and a checked code (signInLink): nothing to escape, but it goes through JSON all the same.
  writeFileSync(file, `<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer"><script>location.replace(${JSON.stringify(url)})</script>\n`, { mode: 0o600 });
  return file;
}

export function registerDashboard(program: Command, io: Output): void {
  program
    .command("dashboard")
    .description("print a one-time sign-in link to the daemon's page (it works once, within a minute), and open it where a browser is at hand")
    .addOption(daemonOption())
    .option("--no-open", "only print the link")
    .addOption(jsonOption("print {url, expires_at}")).addOption(outputOption())
    .action(async (opts: { daemon?: string; open: boolean; json?: boolean }) => {
      const link = await askLink(await readerTarget(opts.daemon, "dashboard"));
      if (opts.json) io.json(link);
      else io.out(link.url);
      const opener = wantsBrowser(opts.open, process.env) ? await xdgOpen(process.env.PATH) : undefined;
      if (opener === undefined) return;
      const { spawn } = await import("node:child_process");
      // The code never goes on a command line (every user can read /proc/PID/cmdline): the browser
      // opens a file only this user can read, which sends it on to the link. An argv, never a shell.
      const page = await redirectFile(link.url);
      const child = spawn(opener, [page], { stdio: "ignore", detached: true });
      child.on("error", (e) => io.warn(`could not open the link with ${opener}: ${e.message}`));
      child.unref();
    });
}
