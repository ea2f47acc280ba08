import { jsonOption, outputOption } from "./options.js";
import path from "node:path";
import type { Command } from "commander";
import { namedClusterFile, SOURCE_LABEL } from "../cluster/locate.js";
import { renderClusterToml } from "../cluster/write.js";
import { UserError } from "../config/errors.js";
import { probeHosts, parseHostArg } from "../setup/cluster-init.js";
import { checkClusterName, namedClusters, refuseOverwrite, useCluster, writeClusterFile } from "../setup/cluster-config.js";
import { existsSync } from "node:fs";
import { defaultClusterName, findCluster, loadCluster, userConfigDirs } from "../app/this-process.js";
import type { Output } from "../app/output.js";

interface InitOptions {
  name: string;
  file?: string;
  force?: boolean;
  sshConfig?: string;
  identity?: string;
  knownHosts?: string;
  json?: boolean;
}

export function registerCluster(program: Command, io: Output): void {
  const cluster = program.command("cluster").description("write, list and show cluster files (kept in ~/.config/launcher/clusters/)");

  cluster
    .command("init")
    .description("probe the hosts as doctor does and write a cluster file with what each one reports (the hosts' order is the rank order)")
    .argument("<host...>", "[user@]host[:port] of each node, head first")
    .option("--name <name>", "the cluster's name; it is written to ~/.config/launcher/clusters/NAME.toml", "spark")
    .option("--file <path>", "write this file instead (e.g. ./cluster.toml)")
    .option("--force", "replace the file if it exists")
    .option("--ssh-config <file>", "SSH config file to reach the hosts (written into the file's [ssh])")
    .option("--identity <file>", "private key to reach the hosts (written into the file's [ssh])")
    .option("--known-hosts <file>", "known_hosts file (written into the file's [ssh])")
    .addOption(jsonOption()).addOption(outputOption())
    .action(async (hosts: string[], opts: InitOptions) => {
      const name = checkClusterName(opts.name, "--name");
      const dirs = userConfigDirs();
      const file = opts.file ?? namedClusterFile(dirs, name);
      // Before the probe, so that a refused overwrite costs nothing; the write checks again.
      if (!opts.force && existsSync(file)) throw refuseOverwrite(file);
      const abs = (p: string | undefined): string | undefined => (p === undefined ? undefined : path.resolve(p));
      const ssh = {
        ...(opts.sshConfig === undefined ? {} : { config: abs(opts.sshConfig) as string }),
        ...(opts.identity === undefined ? {} : { identity: abs(opts.identity) as string }),
        ...(opts.knownHosts === undefined ? {} : { known_hosts: abs(opts.knownHosts) as string }),
        options: [],
      };
      const { detected, unreachable } = await probeHosts(name, hosts.map(parseHostArg), ssh, new Date().toISOString());
      if (unreachable.length > 0) {
        throw new UserError(
          `cannot reach ${unreachable.length} of ${hosts.length} host(s); nothing was written:\n${unreachable.map((u) => `  - ${u.host}: ${u.reason}`).join("\n")}`,
          "check that `ssh HOST` works without a password for each, or leave the host out",
        );
      }
      writeClusterFile(file, renderClusterToml(detected), opts.force === true);
      // The first cluster written to the config folder becomes the default; later ones wait for `cluster use`.
      const madeDefault = opts.file === undefined && defaultClusterName(dirs) === undefined;
      if (madeDefault) useCluster(dirs, name);
      if (opts.json) {
        io.json({ file, default: madeDefault, nodes: detected.nodes });
        return;
      }
      io.out(`wrote ${file}`);
      for (const n of detected.nodes) {
        const f = n.facts;
        io.out(`  ${n.name.padEnd(10)} ${n.user === undefined ? "" : `${n.user}@`}${n.host}${n.port === undefined ? "" : `:${n.port}`}  fabric ${f.fabric_iface ?? "?"} ${f.fabric_ip ?? "?"}  hca ${f.hca.join(",") || "none"}${f.gid_index === undefined ? "" : ` gid ${f.gid_index}`}`);
        for (const finding of n.findings) io.out(`    ${finding.severity}: ${finding.message}`);
      }
      if (madeDefault) io.out(`${name} is now the default cluster: commands use it without --cluster`);
      else if (opts.file === undefined) io.out(`\`launcher cluster use ${name}\` makes it the default; until then pass --cluster ${name}`);
    });

  cluster
    .command("list")
    .description("the named clusters of ~/.config/launcher/clusters/, the default marked with *")
    .addOption(jsonOption()).addOption(outputOption())
    .action((opts: { json?: boolean }) => {
      const dirs = userConfigDirs();
      const def = defaultClusterName(dirs);
      const all = namedClusters(dirs);
      const now = findCluster(undefined);
      const inUse = now.found ? { file: now.file, source: now.source } : undefined;
      if (opts.json) {
        io.json({ clusters: all.map((c) => ({ ...c, default: c.name === def })), default: def ?? null, in_use: inUse ?? null });
        return;
      }
      if (all.length === 0) io.out(`no named clusters in ${dirs.clusters}; \`launcher cluster init HOST...\` writes one`);
      for (const c of all) io.out(`${c.name === def ? "*" : " "} ${c.name.padEnd(16)} ${c.file}`);
      io.out(inUse === undefined ? "commands without --cluster find no cluster" : `commands without --cluster read ${inUse.file} (${SOURCE_LABEL[inUse.source]})`);
    });

  cluster
    .command("show")
    .description("which cluster file a command reads, and its nodes")
    .argument("[cluster]", "a cluster file or name (default: as every command finds it)")
    .addOption(jsonOption()).addOption(outputOption())
    .action((ref: string | undefined, opts: { json?: boolean }) => {
      const choice = findCluster(ref);
      if (!choice.found) throw new UserError(choice.message, choice.hint);
      const c = loadCluster(ref);
      if (opts.json) {
        io.json({ file: choice.file, source: choice.source, name: c.name, api_port: c.api_port, nodes: c.nodes });
        return;
      }
      io.out(`${c.name}: ${choice.file} (from ${SOURCE_LABEL[choice.source]})`);
      for (const n of c.nodes) {
        const fabric = n.fabric_ip === undefined && n.fabric_iface === undefined ? "fabric: detected at up" : `fabric ${n.fabric_iface ?? "?"} ${n.fabric_ip ?? "?"}`;
        io.out(`  ${String(n.rank).padStart(2)} ${n.name.padEnd(10)} ${n.user === undefined ? "" : `${n.user}@`}${n.host}${n.port === undefined ? "" : `:${n.port}`}  ${fabric}  gpus ${n.gpus}${n.rank === 0 ? "  (head)" : ""}`);
      }
    });

  cluster
    .command("use")
    .description("make a named cluster the default (read when neither --cluster, $LAUNCHER_CLUSTER nor ./cluster.toml says otherwise)")
    .argument("<name>", "a cluster of `launcher cluster list`")
    .action((name: string) => {
      const file = useCluster(userConfigDirs(), name);
      io.out(`default cluster: ${name} (${file})`);
    });
}
