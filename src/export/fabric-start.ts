import type { ClusterNode } from "../cluster/cluster.js";
import { GIDS_READ } from "../cluster/sysfs.js";
import { shellQuote } from "../config/shell-words.js";
import { NOT_FABRIC_ADDRESS, NOT_FABRIC_ADDRESS_TAIL } from "../contract/pod-start.js";
import type { EngineAdapter, EngineRecipe } from "../engine/adapter.js";
import { POD_IP } from "./commands.js";

/*
 * A Kubernetes pod lands on whichever node the scheduler picks, so one template cannot carry a
 * node's HCA, GID index, interface or address as `up` does from the cluster file. The container
 * instead starts under a POSIX sh script that reads the node's own /sys/class/infiniband by the
 * rules of doctor's detection (src/cluster/detect.ts detectFabric, src/cluster/sysfs.ts readHcas),
 * exports the env the engine's adapter gives a node with those facts (EngineAdapter.nodeEnv), and
 * execs the rank's command. The env part is not written by hand: fabricExports evaluates nodeEnv
 * itself with shell variables for the facts (below). test/unit/export-fabric.test.ts runs the
 * script against the fixture trees and compares it with detectFabric and nodeEnv.
 *
 * One difference from doctor: doctor reads a netdev's IPv4 address from `ip -o -4 addr`, which an
 * engine image may not have; the script reads the same address from the port's RoCE v2 GID, which
 * the kernel fills from the netdev's IPv4 addresses (Linux drivers/infiniband/core/roce_gid_mgmt.c,
 * update_gid_ip / enum_netdev_ipv4_ips), as an IPv4-mapped GID (src/cluster/sysfs.ts gidIpv4).
 */

/** The shell variables holding one node's fabric facts, as the script detects them. */
export const FACT_VARS = {
  iface: "LAUNCHER_FABRIC_IFACE",
  ip: "LAUNCHER_FABRIC_IP",
  hcas: "LAUNCHER_FABRIC_HCAS",
  gid: "LAUNCHER_FABRIC_GID",
  portsUp: "LAUNCHER_FABRIC_PORTS_UP",
} as const;

/** How a pod's start refuses a named fabric interface its network namespace does not have. */
export const POD_IFACE_ABSENT = "launcher: fabric interface";

/** Four ports up changes the env (fabric-env.ts): every count up to this many is evaluated, more counts as this. */
const PORTS_EVALUATED = 8;

/*
 * The rules, one list that detectFabric (src/cluster/detect.ts) and the script below both follow,
 * each step marked in both by its number (test/unit/export-fabric.test.ts checks them equal on
 * every fixture tree). A value the cluster file (detectFabric) or the template (the script) gives
 * wins; each rule fills only what is left empty.
 *   D1 active HCAs: those with a port ACTIVE, in byte order of their names; ports up: every ACTIVE port.
 *   D2 fabric IP: with the interface known, the address of the active HCA whose device/net holds
 *      that interface; else the first active HCA's (name order) address.
 *   D3 fabric interface: the one holding the fabric IP.
 *   D4 fabric HCA: the active HCA whose device/net holds the interface, else the first active one.
 *   D5 GID index: the fabric HCA's first ACTIVE port with a RoCE v2 GID of the fabric IP (any
 *      RoCE v2 GID when no IP is known), else its first port with any RoCE v2 GID.
 *   D6 HCAs: every active HCA.
 * An address is read from the RoCE v2 GID table by the script and from `ip -o -4 addr` by doctor
 * (the kernel fills the one from the other: see the top of this file).
 */

/**
 * The facts both networks share: the GID reader (GIDS_READ per port, as doctor's dump reads) and
 * the active HCAs (D1). LC_ALL=C keeps the globs in the byte order readHcas's sort() lists entries
 * in. LAUNCHER_SYSFS_ROOT is "" on a node; tests point it at a fixture tree. rocev2 PORT [NETDEV]
 * prints "INDEX IP" of the port's first RoCE v2 IPv4 GID, of NETDEV's only when one is named: the
 * kernel names the netdev each GID came from in gid_attrs/ndevs (Linux
 * drivers/infiniband/core/sysfs.c, the port's "ndevs" group beside "types").
 */
const DETECT_COMMON = `LC_ALL=C
root=\${LAUNCHER_SYSFS_ROOT:-}
ib=$root/sys/class/infiniband
gidip() {
  case $1 in 0000:0000:0000:0000:0000:ffff:[0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]:[0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]) ;; *) return 0 ;; esac
  g=\${1#0000:0000:0000:0000:0000:ffff:}; a=\${g%%:*}; b=\${g#*:}
  printf '%d.%d.%d.%d' $((0x$a >> 8)) $((0x$a & 255)) $((0x$b >> 8)) $((0x$b & 255))
}
rocev2() {
  i=0
  while [ $i -lt ${GIDS_READ} ]; do
    case $(cat "$1/gid_attrs/types/$i" 2>/dev/null) in
      *[Rr][Oo][Cc][Ee]\\ [Vv]2*) v=$(gidip "$(cat "$1/gids/$i" 2>/dev/null)")
        if [ -n "$v" ] && [ "$v" != 0.0.0.0 ] && { [ -z "\${2:-}" ] || [ "$(cat "$1/gid_attrs/ndevs/$i" 2>/dev/null)" = "$2" ]; }; then echo "$i $v"; return 0; fi ;;
    esac
    i=$((i+1))
  done
}
# D1
active= up=0
for h in "$ib"/*; do
  [ -d "$h" ] || continue
  on=0
  for p in "$h"/ports/*; do
    [ -d "$p" ] || continue
    case $(cat "$p/state" 2>/dev/null) in *ACTIVE*) on=1; up=$((up+1)) ;; esac
  done
  [ $on = 1 ] && active="$active \${h##*/}"
done
fabric= first=; for n in $active; do first=$n; break; done`;

/** On the node's network (D2-D4): the interface and the address are the node's own. */
const DETECT_HOST = `# D2
ip= holder= on=$active
if [ -n "\${${FACT_VARS.iface}}" ]; then on=; for n in $active; do [ -e "$ib/$n/device/net/\${${FACT_VARS.iface}}" ] && { on=$n; break; }; done; fi
for n in $on; do
  for p in "$ib/$n"/ports/*; do r=$(rocev2 "$p"); [ -n "$r" ] && { ip=\${r#* }; break 2; }; done
done
# D3
for h in "$ib"/*; do
  [ -n "\${${FACT_VARS.ip}:-$ip}" ] || break
  for p in "$h"/ports/*; do r=$(rocev2 "$p"); [ -n "$r" ] && [ "\${r#* }" = "\${${FACT_VARS.ip}:-$ip}" ] && { for d in "$h"/device/net/*; do [ -e "$d" ] && { holder=\${d##*/}; break; }; done; break 2; }; done
done
: "\${${FACT_VARS.ip}:=$ip}" "\${${FACT_VARS.iface}:=$holder}"
# D4
for n in $active; do
  [ -n "\${${FACT_VARS.iface}}" ] && [ -e "$ib/$n/device/net/\${${FACT_VARS.iface}}" ] && { fabric=$n; break; }
done`;

/**
 * On the pod network the node's interfaces and addresses are not the pod's: an interface counts
 * only if it is in the pod's own network namespace (its /sys/class/net lists only those: Linux
 * sysfs tags the net class per namespace) and a RoCE v2 GID of an active HCA came from it (a
 * macvlan or SR-IOV interface on the fabric port gets one, gid_attrs/ndevs names it). The one
 * named in the template (LAUNCHER_FABRIC_IFACE, which the export itself never sets here) must be
 * there. With none, the interface and the address stay unset, and the first line says so.
 */
const DETECT_POD = `if [ -n "\${${FACT_VARS.iface}}" ] && [ ! -e "$root/sys/class/net/\${${FACT_VARS.iface}}" ]; then
  echo "${POD_IFACE_ABSENT} \${${FACT_VARS.iface}} (${FACT_VARS.iface}) is not in this pod's network namespace; set it to the pod's interface on the fabric (e.g. a Multus network's), or remove it" >&2
  exit 1
fi
want=\${${FACT_VARS.iface}}; ${FACT_VARS.iface}= ${FACT_VARS.ip}=
for n in $active; do
  for p in "$ib/$n"/ports/*; do
    for d in "$root"/sys/class/net/*; do
      d=\${d##*/}; [ -z "$want" ] || [ "$d" = "$want" ] || continue
      [ -e "$root/sys/class/net/$d" ] || continue
      r=$(rocev2 "$p" "$d"); [ -n "$r" ] && { ${FACT_VARS.iface}=$d; ${FACT_VARS.ip}=\${r#* }; fabric=$n; break 3; }
    done
  done
done
[ -n "\${${FACT_VARS.ip}}" ] || echo "launcher: fabric: no interface of this pod holds a RoCE address\${want:+ ($want has none)}: ${FACT_VARS.iface} and ${FACT_VARS.ip} stay unset, and so does the engine's env made from them (NCCL and Gloo choose their own interface)" >&2`;

/** The GID index, the HCAs and the ports up (D5, D6), once the interface and the address are known. */
const DETECT_REST = `: "\${fabric:=$first}"
# D5
gid= any=
if [ -n "$fabric" ]; then
  for p in "$ib/$fabric"/ports/*; do
    r=$(rocev2 "$p"); [ -n "$r" ] || continue
    : "\${any:=\${r%% *}}"
    case $(cat "$p/state" 2>/dev/null) in *ACTIVE*) if [ -z "\${${FACT_VARS.ip}}" ] || [ "\${r#* }" = "\${${FACT_VARS.ip}}" ]; then gid=\${r%% *}; break; fi ;; esac
  done
fi
# D6
hcas=; for n in $active; do hcas="\${hcas:+$hcas,}$n"; done
: "\${${FACT_VARS.gid}:=\${gid:-$any}}" "\${${FACT_VARS.hcas}:=$hcas}" "\${${FACT_VARS.portsUp}:=$up}"
ports=$((${FACT_VARS.portsUp} > ${PORTS_EVALUATED} ? ${PORTS_EVALUATED} : ${FACT_VARS.portsUp}))`;

/** The detection of a pod on the node's network or on the pod network. */
const detect = (network: "host" | "pod"): string => [DETECT_COMMON, network === "host" ? DETECT_HOST : DETECT_POD, DETECT_REST].join("\n");

/** Shell text that evaluates to `value`: its `${NAME}` parts expanded (quoted), the rest literal. */
function shellValue(value: string): string {
  return value
    .split(/(\$\{[A-Za-z_][A-Za-z0-9_]*\})/)
    .filter((part) => part !== "")
    .map((part) => (/^\$\{[A-Za-z_][A-Za-z0-9_]*\}$/.test(part) ? `"${part}"` : shellQuote(part)))
    .join("");
}

const HCA_VAR = "h";
const GID_SENTINEL = 987654321;

type Fact = "iface" | "ip" | "hcas" | "gid";

/** A node whose facts are shell variables (`hcas` a one-element list of the loop's $h). */
function symbolicNode(without: Fact | undefined, portsUp: number, hcas: readonly string[] = [`\${${HCA_VAR}}`]): ClusterNode {
  return {
    name: "node",
    rank: 0,
    host: "node",
    gpus: 1,
    ...(without === "iface" ? {} : { fabric_iface: `\${${FACT_VARS.iface}}` }),
    ...(without === "ip" ? {} : { fabric_ip: `\${${FACT_VARS.ip}}` }),
    hca: without === "hcas" ? [] : hcas,
    ...(without === "gid" ? {} : { gid_index: GID_SENTINEL }),
    ports_up: portsUp,
  };
}

/** One key's export line: a template, the facts it needs set, the port counts it is set for. */
interface ExportLine {
  readonly key: string;
  readonly template: string;
  readonly needs: readonly Fact[];
  readonly ports: readonly number[];
}

/**
 * The engine's per-node env as shell: nodeEnv evaluated with the facts as shell variables, each
 * key guarded by the facts without which nodeEnv leaves it out, and by the port counts it is set
 * for. A key made from the HCA list (one value per HCA, comma-joined, as NCCL_IB_HCA and
 * UCX_NET_DEVICES are) is built in a loop over the detected HCAs. A nodeEnv this cannot express
 * (a value that is not per HCA joined by commas) is a launcher bug, and says so.
 */
export function fabricExports(engine: Pick<EngineAdapter, "nodeEnv" | "name">, recipe: Pick<EngineRecipe, "distributed_backend">): string {
  const env = (without: Fact | undefined, ports: number, hcas?: readonly string[]): Record<string, string> => engine.nodeEnv(recipe, symbolicNode(without, ports, hcas));
  const counts = Array.from({ length: PORTS_EVALUATED + 1 }, (_, i) => i);
  const keys = [...new Set(counts.flatMap((n) => Object.keys(env(undefined, n))))];
  const lines: ExportLine[] = keys.map((key) => {
    const ports = counts.filter((n) => key in env(undefined, n));
    const at = ports[0] as number;
    const template = (env(undefined, at)[key] as string).replaceAll(String(GID_SENTINEL), `\${${FACT_VARS.gid}}`);
    const needs = (["iface", "ip", "hcas", "gid"] as const).filter((f) => !(key in env(f, at)));
    const two = env(undefined, at, ["${" + HCA_VAR + "}", "${" + HCA_VAR + "}"])[key];
    if (template.includes(`\${${HCA_VAR}}`) && two !== `${template},${template}`) {
      throw new Error(`engine ${engine.name}: its node env ${key} is not one value per HCA joined by commas, which the export's start script cannot detect`);
    }
    return { key, template, needs, ports };
  });
  return lines.map(exportLine).join("\n");
}

function exportLine(line: ExportLine): string {
  const guards = line.needs.map((f) => `[ -n "\${${FACT_VARS[f]}}" ]`);
  if (line.ports.length <= PORTS_EVALUATED) guards.push(`case $ports in ${line.ports.join("|")}) true ;; *) false ;; esac`);
  const set = line.template.includes(`\${${HCA_VAR}}`)
    ? `v=; IFS=,; for ${HCA_VAR} in $${FACT_VARS.hcas}; do v="\${v:+$v,}"${shellValue(line.template)}; done; unset IFS; export ${line.key}="$v"`
    : `export ${line.key}=${shellValue(line.template)}`;
  return guards.length === 0 ? set : `if ${guards.join(" && ")}; then ${set}; fi`;
}

/**
 * --node-ip-is-fabric: the pod's IP (the downward API's, its node's address under host networking)
 * must be one of the node's fabric addresses, or the pod ends before the engine runs, saying so on
 * stderr (a fatal line: src/contract/pod-start.ts). Nothing then listens on another address. Any
 * active RoCE v2 port's address counts, not only the one detection picks above: a Spark has two to
 * four (test/fixtures/spark), and k3s's --node-ip may name any of them; each is on the fabric.
 */
const POD_IP_CHECK = `fabric_ips=
for n in $active; do
  for p in "$ib/$n"/ports/*; do
    case $(cat "$p/state" 2>/dev/null) in *ACTIVE*) r=$(rocev2 "$p"); [ -n "$r" ] && fabric_ips="\${fabric_ips:+$fabric_ips }\${r#* }" ;; esac
  done
done
case " $fabric_ips " in
  *" \${${POD_IP}:-none} "*) ;;
  *) echo "${NOT_FABRIC_ADDRESS} \${${POD_IP}:-} ${NOT_FABRIC_ADDRESS_TAIL} (\${fabric_ips:-none detected}): --node-ip-is-fabric needs each node's Kubernetes address to be one of its fabric addresses (k3s or MicroK8s --node-ip set to it); the engine is not started" >&2
     exit 1 ;;
esac`;

/** What the start checks before the engine runs, and on which network it detects. */
export interface StartChecks {
  readonly podIpIsFabric?: boolean;
  /** The pod's network namespace is its own (--network pod): only its own interfaces count. */
  readonly network?: "host" | "pod";
}

/**
 * The container's start: detect, export, then exec the rank's command ("$@"). It is `sh -c`'s
 * script; the argv after it is `$0` (a name for messages) and the command. Its facts are printed
 * on stderr, so that `kubectl logs` shows what the node was found to have.
 */
export function fabricStartScript(engine: Pick<EngineAdapter, "nodeEnv" | "name">, recipe: Pick<EngineRecipe, "distributed_backend">, checks: StartChecks = {}): string {
  const said = Object.values(FACT_VARS).map((v) => `${v}=$${v}`).join(" ");
  const check = checks.podIpIsFabric === true ? `\n${POD_IP_CHECK}` : "";
  return `${detect(checks.network ?? "host")}\n${fabricExports(engine, recipe)}\necho "launcher: fabric detected: ${said}" >&2${check}\nexec "$@"`;
}

/** The name the start script goes by (`$0`), in its messages. */
export const START_SCRIPT_NAME = "launcher-fabric";
