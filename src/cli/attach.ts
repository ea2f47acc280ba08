import type { Command } from "commander";
import { followBoot } from "../daemon/client.js";
import { watchBoot } from "./boot-view.js";
import { daemonOption, requireDaemon } from "./daemon-target.js";
import type { Output } from "../app/output.js";
import { jsonOption, outputOption } from "./options.js";

export function registerAttach(program: Command, io: Output): void {
  program
    .command("attach")
    .description("follow a boot the daemon runs, from its start, as `up` shows it (Ctrl-C detaches; the boot goes on)")
    .argument("<deployment>", "the deployment being booted")
    .addOption(daemonOption())
    .addOption(jsonOption("print the result as JSON")).addOption(outputOption())
    .action(async (name: string, opts: { daemon?: string; json?: boolean }) => {
      const daemon = requireDaemon(opts.daemon, "attach");
      await watchBoot(daemon, io, opts.json === true, false, (onEvent, signal) => followBoot(daemon, name, onEvent, signal));
    });
}
