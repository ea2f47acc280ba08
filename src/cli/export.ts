import { readFileSync } from "node:fs";
import path from "node:path";
import { userInfo } from "node:os";
import type { Command } from "commander";
import { daemonUnitText, stableLauncherArgv } from "../daemon/systemd.js";
import { clusterPath } from "../app/this-process.js";
import { PACKAGE_ROOT, packageBin, realPath } from "../config/package-info.js";
import { DEFAULT_LISTEN } from "../contract/defaults.js";
import type { Output } from "../app/output.js";
import { clusterOption } from "./options.js";
import { registerExportK8s } from "./export-k8s.js";

interface SystemdFlags {
  system?: boolean;
  listen: string;
  cluster?: string;
  apiKeyFile?: string;
  adminKeyFile?: string;
}

const absolute = (file: string): string => path.resolve(file);


/** The `launcher` commands on PATH that are this package's own bin (package.json "bin" of a package of this name), as real paths. */
function launchersOnPath(): string[] {
  const name = packageName(PACKAGE_ROOT);
  const bin = `${path.sep}${path.normalize(packageBin(PACKAGE_ROOT))}`;
  const found = (process.env.PATH ?? "").split(path.delimiter).filter((d) => path.isAbsolute(d)).map((d) => realPath(path.join(d, "launcher")));
  return [...new Set(found.filter((p): p is string => p !== undefined && p.endsWith(bin) && packageName(p.slice(0, -bin.length)) === name))];
}


/** The name in a package folder's package.json; undefined when it has none that reads. */
function packageName(root: string): string | undefined {
  try {
    const name: unknown = (JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { name?: unknown }).name;
    return typeof name === "string" ? name : undefined;
  } catch {
    return undefined;
  }
}

/** This launcher's command line, at a path that lasts (never npx's cache). */
function unitArgv(args: readonly string[]): string[] {
  const script = process.argv[1] ?? "launcher";
  return stableLauncherArgv({ execPath: process.execPath, execArgv: process.execArgv, script: realPath(script) ?? absolute(script), onPath: launchersOnPath() }, args);
}

export function registerExport(program: Command, io: Output): void {
  const group = program.command("export").description("print files that run launcher elsewhere (a systemd unit for the daemon, a recipe on Kubernetes)");
  group
    .command("systemd")
    .description("print a systemd unit that runs the daemon (launcher serve --control) and brings it back after a reboot")
    .option("--system", "a system unit (runs as this user; /etc/systemd/system) instead of a user unit (~/.config/systemd/user)")
    .option("--listen <host:port>", "the daemon's address", DEFAULT_LISTEN)
    .addOption(clusterOption())
    .option("--api-key-file <file>", "the inference keys' file the daemon reads")
    .option("--admin-key-file <file>", "the control API's admin keys' file the daemon reads")
    .action((flags: SystemdFlags) => {
      // Absolute paths: a unit does not run in this shell's folder.
      const cluster = absolute(clusterPath(flags.cluster));
      const args = [
        "serve",
        "--control",
        "--listen",
        flags.listen,
        "--cluster",
        cluster,
        ...(flags.apiKeyFile === undefined ? [] : ["--api-key-file", absolute(flags.apiKeyFile)]),
        ...(flags.adminKeyFile === undefined ? [] : ["--admin-key-file", absolute(flags.adminKeyFile)]),
      ];
      const argv = unitArgv(args);
      const environment: Record<string, string> = {};
      for (const name of ["LAUNCHER_RECIPES", "LAUNCHER_DOCKER_IMAGES", "XDG_STATE_HOME", "XDG_CONFIG_HOME"]) {
        const value = process.env[name];
        if (value !== undefined && value !== "") environment[name] = value;
      }
      io.out(daemonUnitText({ scope: flags.system ? "system" : "user", argv, workingDirectory: process.cwd(), user: userInfo().username, environment }));
    });
  registerExportK8s(group, io);
}
