import type { Command } from "commander";
import { readTextFile } from "../config/read-file.js";
import type { Output } from "../app/output.js";
import { processEnvironment } from "../app/environment.js";
import { daemonConfig, SERVE_DEFAULTS, type ServeFlags } from "../daemon/config.js";
import { MAX_CAPTURE_BYTES } from "../gateway/capture.js";
import { childrenOutliveTheTerminal } from "../remote/transport.js";
import { clusterOption } from "./options.js";
import { advertiseLocalDaemon } from "./daemon-target.js";
import { outliveTheTerminal } from "./terminal.js";

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/** Resolves at the first of `signals`; from then on they are this process's again (a second one ends it at once). */
function firstOf(signals: readonly NodeJS.Signals[]): Promise<void> {
  return new Promise((resolve) => {
    const heard = (): void => {
      for (const s of signals) process.off(s, heard);
      resolve();
    };
    for (const s of signals) process.on(s, heard);
  });
}

export function registerServe(program: Command, io: Output): void {
  program
    .command("serve")
    .description("the OpenAI-compatible gateway: one address and stable model names for every deployment and lane (--cluster may be repeated, one per cluster)")
    .option("--listen <host:port>", "address to listen on", SERVE_DEFAULTS.listen)
    .addOption(clusterOption().argParser(collect))
    .option("--api-key <key>", "accept this API key (repeatable; prefer --api-key-file or $LAUNCHER_API_KEY: flags show in ps)", collect)
    .option("--api-key-file <file>", "accept the keys in this file, one per line")
    .option("--poll <duration>", "how often to read the clusters' labels", SERVE_DEFAULTS.poll)
    .option("--restart-backoff <duration>", "for deployments started with up --restart: the wait before the second restart in a row, doubled for each further one (the first is at once)", SERVE_DEFAULTS.restartBackoff)
    .option("--upstream-timeout <duration>", "longest wait for an engine's first byte (a long non-streamed generation)", SERVE_DEFAULTS.upstreamTimeout)
    .option("--idle-timeout <duration>", "longest silence from an engine in the middle of an answer", SERVE_DEFAULTS.idleTimeout)
    .option("--probe-every <duration>", "with no generation completed through the gateway for this long, send a serving deployment a one-token request of its own", SERVE_DEFAULTS.probeEvery)
    .option("--probe-bound <duration>", "a deployment whose /health answers but whose probe completes no token within this is wedged: not routed to, and restarted under up --restart on-failure", SERVE_DEFAULTS.probeBound)
    .option("--control", "also serve the control API (boots submitted by `launcher up`, attach, cancel): to this user through a socket of its own, and over TCP to an admin key only")
    .option("--capture-bodies <bytes>", `keep the first BYTES (at most ${MAX_CAPTURE_BYTES}) of each request's and answer's body in the activity log, keys and credentials removed; only an admin key reads them (default: none)`)
    .option("--admin-key-file <file>", "the control API's admin keys, one per line (or $LAUNCHER_ADMIN_KEY); never an inference key")
    .action(async (flags: ServeFlags) => {
      // A daemon started in a terminal that closes goes on (its boots take an hour): SIGHUP is
      // ignored, and a log line to a terminal or pipe that is gone is lost rather than fatal.
      // Stopping stays SIGINT/SIGTERM (below); a unit (launcher export systemd) has no terminal at all.
      childrenOutliveTheTerminal();
      const keepTerminalFree = outliveTheTerminal(() => io.err("launcher serve: SIGHUP ignored (its terminal closed?): the daemon goes on; stop it with SIGTERM or Ctrl-C"));
      const env = { ...processEnvironment(), console: io };
      const config = daemonConfig(flags, env.vars, { readFile: readTextFile, clusterPath: env.clusterPath });
      // Loaded here, not with the CLI: the daemon's code is no cost to `serve --help` or any other command.
      const { Daemon } = await import("../daemon/daemon.js");
      const daemon = await Daemon.start(config, env, { advertise: advertiseLocalDaemon });
      await firstOf(["SIGINT", "SIGTERM"]);
      await daemon.stop();
      keepTerminalFree();
    });
}
