import { isIP } from "node:net";
import path from "node:path";
import { error, hasErrors, warning, type Diagnostic } from "../config/diagnostic.js";
import { ADDRESS, HCA, HOME, HOST, IFACE, kindDiagnostics, NODE_NAME, USER } from "../config/kinds.js";
import { schemaDiagnostics } from "../config/schema-issues.js";
import { parseTomlDocument, type TomlPath } from "../config/toml-document.js";
import type { Cluster, ClusterNode } from "./cluster.js";
import { CLUSTER_KEYS, clusterFileSchema, DEFAULT_RUN_ARGS, DOCKER_KEYS, NODE_KEYS, SSH_KEYS } from "./schema.js";

export interface ParsedCluster {
  readonly cluster?: Cluster;
  readonly diagnostics: Diagnostic[];
}

const knownKeys = (p: TomlPath): readonly string[] =>
  p.length === 0 ? CLUSTER_KEYS : p[0] === "nodes" ? NODE_KEYS : p[0] === "ssh" ? SSH_KEYS : p[0] === "docker" ? DOCKER_KEYS : [];

/** The home launcher assumes for an SSH user when the cluster file gives none. */
export function defaultHome(user: string | undefined): string | undefined {
  if (user === undefined) return undefined;
  return user === "root" ? "/root" : `/home/${user}`;
}

/**
 * api_bind: one of the named choices or an IP literal (the engine binds to it as written; a name
 * would be resolved inside the container, where it may mean another address). "any" works but
 * opens every route the engine's key does not guard to the whole network: a warning.
 */
function apiBindDiagnostics(value: string | undefined, at: Diagnostic["loc"]): Diagnostic[] {
  if (value === undefined || value === "management" || value === "loopback") return [];
  if (value === "any") {
    return [
      warning(
        at,
        'api_bind = "any": the head\'s engine listens on every address, so anyone on its networks reaches the engine directly, past the gateway, including routes its API key does not guard (the engine\'s key may guard only its API routes)',
        'remove api_bind (default "management": the address launcher and its gateway use), or set "loopback" when they run on the head',
      ),
    ];
  }
  if (isIP(value) !== 0) return [];
  return [error(at, `api_bind ${JSON.stringify(value)} is not "management", "loopback", "any" nor an IP address`, 'write one of them, e.g. api_bind = "management" (the default) or api_bind = "10.0.0.11"')];
}

export function parseCluster(file: string, text: string): ParsedCluster {
  const parsed = parseTomlDocument(file, text);
  if (!parsed.ok) return { diagnostics: parsed.diagnostics };
  const doc = parsed.doc;
  const result = clusterFileSchema.safeParse(doc.value);
  if (!result.success) return { diagnostics: schemaDiagnostics(doc, result.error.issues, knownKeys) };
  const v = result.data;
  const diagnostics: Diagnostic[] = [];
  const names = new Map<string, number>();
  const hosts = new Map<string, number>();
  const fabricIps = new Map<string, number>();
  v.nodes.forEach((n, i) => {
    const at = (key: string): ReturnType<typeof doc.locate> => doc.locate(["nodes", i, key]);
    // Every value that reaches a command line (ssh's destination and -l, container names, env
    // values, mount specs through ~) is checked for its kind here, where its line is known.
    const kinds = [
      ["name", NODE_NAME, n.name],
      ["host", HOST, n.host],
      ["user", USER, n.user],
      ["home", HOME, n.home],
      ["address", ADDRESS, n.address],
      ["fabric_iface", IFACE, n.fabric_iface],
    ] as const;
    for (const [key, kind, value] of kinds) if (value !== undefined) diagnostics.push(...kindDiagnostics(at(key), kind, `nodes[${i}].${key}`, value));
    (n.hca ?? []).forEach((h, j) => diagnostics.push(...kindDiagnostics(doc.locate(["nodes", i, "hca", j]), HCA, `nodes[${i}].hca[${j}]`, h)));
    const check = (map: Map<string, number>, value: string | undefined, key: string): void => {
      if (value === undefined) return;
      const before = map.get(value);
      if (before !== undefined) diagnostics.push(error(at(key), `nodes[${i}].${key} ${JSON.stringify(value)} is also nodes[${before}].${key}`, "each node appears once in the cluster file"));
      else map.set(value, i);
    };
    check(names, n.name, "name");
    check(hosts, `${n.user ?? ""}@${n.host}:${n.port ?? 22}`, "host");
    check(fabricIps, n.fabric_ip, "fabric_ip");
    if (n.fabric_ip !== undefined && isIP(n.fabric_ip) === 0) {
      diagnostics.push(error(at("fabric_ip"), `nodes[${i}].fabric_ip ${JSON.stringify(n.fabric_ip)} is not an IP address`));
    }
  });
  diagnostics.push(...apiBindDiagnostics(v.api_bind, doc.locate(["api_bind"])));
  if (hasErrors(diagnostics)) return { diagnostics };

  const dir = path.dirname(file);
  const rel = (p: string | undefined): string | undefined => (p === undefined ? undefined : path.isAbsolute(p) ? p : path.join(dir, p));
  const nodes: ClusterNode[] = v.nodes.map((n, rank) => {
    const home = n.home ?? defaultHome(n.user);
    return {
      name: n.name,
      rank,
      host: n.host,
      ...(n.user === undefined ? {} : { user: n.user }),
      ...(n.port === undefined ? {} : { port: n.port }),
      ...(home === undefined ? {} : { home }),
      ...(n.fabric_ip === undefined ? {} : { fabric_ip: n.fabric_ip }),
      ...(n.fabric_iface === undefined ? {} : { fabric_iface: n.fabric_iface }),
      hca: n.hca ?? [],
      ...(n.gid_index === undefined ? {} : { gid_index: n.gid_index }),
      gpus: n.gpus ?? 1,
      ...(n.address === undefined ? {} : { address: n.address }),
      ...(n.memory_floor === undefined ? {} : { memory_floor: n.memory_floor }),
    };
  });
  const ssh = v.ssh ?? {};
  const config = rel(ssh.config);
  const knownHosts = rel(ssh.known_hosts);
  const identity = rel(ssh.identity);
  const cluster: Cluster = {
    file,
    name: v.name ?? path.basename(file, ".toml"),
    api_port: v.api_port ?? 8000,
    master_port: v.master_port ?? 29501,
    ...(v.api_bind === undefined ? {} : { api_bind: v.api_bind }),
    ssh: {
      ...(config === undefined ? {} : { config }),
      ...(knownHosts === undefined ? {} : { known_hosts: knownHosts }),
      ...(identity === undefined ? {} : { identity }),
      options: ssh.options ?? [],
    },
    run_args: v.docker?.run_args ?? [...DEFAULT_RUN_ARGS],
    extra_args: v.docker?.extra_args ?? [],
    nodes,
    ...(v.memory_floor === undefined ? {} : { memory_floor: v.memory_floor }),
  };
  return { cluster, diagnostics };
}
