import { createHash } from "node:crypto";
import type { ClusterNode, SshSettings } from "../cluster/cluster.js";
import { UserError } from "../config/errors.js";
import { privateRuntimeDir } from "../config/private-dir.js";
import { MAX_REMOTE_COMMAND_BYTES, remoteCommand, remoteCommandBytes } from "../config/shell-words.js";
import { runLocal, spawnLocal, streamLocal, type ExecOptions, type ExecResult, type Transport } from "./transport.js";

/**
 * The folder of ssh's control sockets: this user's alone (src/config/private-dir.ts), because
 * whoever can reach a master's socket runs commands over its connection, and a client that finds
 * a socket there hands it every command, its stdin (tokens, secrets) and its answers.
 */
export const controlDir = (): string => privateRuntimeDir("ssh", "ssh's connection-sharing folder");

/**
 * A shared connection keeps the options of the ssh that opened it: one opened under other
 * [ssh] options (another cluster file's ConnectTimeout, say) must not be reused, so the options
 * name a socket of their own. %C hashes only the local and remote host, port and user (ssh_config(5)).
 */
const controlPath = (dir: string, options: readonly string[]): string =>
  options.length === 0 ? `${dir}/%C` : `${dir}/%C-${createHash("sha256").update(options.join("\n")).digest("hex").slice(0, 8)}`;

/** ssh options for one node: connection reuse, strict host keys, and the cluster file's settings. */
export function sshArgs(node: ClusterNode, ssh: SshSettings, dir: string = controlDir()): string[] {
  return [
    ...(ssh.config === undefined ? [] : ["-F", ssh.config]),
    ...(ssh.known_hosts === undefined ? [] : ["-o", `UserKnownHostsFile=${ssh.known_hosts}`]),
    ...(ssh.identity === undefined ? [] : ["-i", ssh.identity, "-o", "IdentitiesOnly=yes"]),
    "-o", "BatchMode=yes",
    "-o", "ControlMaster=auto",
    "-o", `ControlPath=${controlPath(dir, ssh.options)}`,
    "-o", "ControlPersist=60",
    // Before the timeouts below: ssh keeps the first value it obtains for each option
    // (ssh_config(5)), so a cluster file's ConnectTimeout or ServerAliveInterval is the one used.
    ...ssh.options.flatMap((o) => ["-o", o]),
    "-o", "ConnectTimeout=10",
    "-o", "ServerAliveInterval=5",
    "-o", "ServerAliveCountMax=3",
    ...(node.user === undefined ? [] : ["-l", node.user]),
    ...(node.port === undefined ? [] : ["-p", String(node.port)]),
  ];
}

/**
 * ssh's argv for one remote command: options, then `--`, the host and the command as one string.
 * OpenSSH parses options again after the host unless a `--` came before it (ssh.c main:
 * `opt_terminated` is set by a `--` before the destination, and only then is the rest left
 * alone), so the `--` goes before the host: neither the host nor the command can be an option.
 * A second `--` after the host would reach the remote shell as part of the command.
 */
export function sshCommandArgs(base: readonly string[], host: string, argv: readonly string[]): string[] {
  // The plan refuses a recipe this long; this guards every other command, naming the node.
  const bytes = remoteCommandBytes(argv);
  if (bytes > MAX_REMOTE_COMMAND_BYTES) throw new UserError(`${host}: a ${bytes}-byte command is longer than the ${MAX_REMOTE_COMMAND_BYTES} bytes a node takes (E2BIG): ${argv.slice(0, 3).join(" ")} ...`);
  return [...base, "--", host, remoteCommand(argv)];
}

/** Runs commands on a node through the system OpenSSH client, reusing one connection per node. */
export function sshTransport(node: ClusterNode, ssh: SshSettings): Transport {
  const base = sshArgs(node, ssh);
  const command = (argv: readonly string[]): string[] => sshCommandArgs(base, node.host, argv);
  return {
    node: node.name,
    exec: (argv: readonly string[], options?: ExecOptions): Promise<ExecResult> => runLocal("ssh", command(argv), options),
    stream: (argv, options) => streamLocal("ssh", command(argv), options?.signal),
    spawn: (argv) => spawnLocal("ssh", command(argv)),
  };
}

/**
 * What `ssh -G` says a destination resolves to: the real host name, user and port behind an alias.
 * OpenSSH prints them as `user X`, `hostname X`, `port N` lines (readconf.c dump_client_config:
 * "Most interesting options first: user, host, port").
 */
export async function resolveSshDestination(node: ClusterNode, ssh: SshSettings): Promise<{ hostname?: string; user?: string; port?: number }> {
  const r = await runLocal("ssh", [...(ssh.config === undefined ? [] : ["-F", ssh.config]), ...(node.user === undefined ? [] : ["-l", node.user]), ...(node.port === undefined ? [] : ["-p", String(node.port)]), "-G", "--", node.host], { timeoutMs: 5000 });
  if (r.code !== 0) return {};
  const out: { hostname?: string; user?: string; port?: number } = {};
  for (const line of r.stdout.split("\n")) {
    const [key, ...rest] = line.split(" ");
    if (key === "hostname") out.hostname = rest.join(" ");
    if (key === "user") out.user = rest.join(" ");
    if (key === "port" && /^\d+$/.test(rest.join(" "))) out.port = Number(rest.join(" "));
  }
  return out;
}
