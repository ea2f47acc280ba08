/**
 * `launcher nodes protect`: what keeps a node reachable when its memory runs out. sshd and
 * dockerd get OOMScoreAdjust=-1000 in a systemd drop-in (systemd.exec(5): the value is written to
 * the service's processes when it starts; -1000 is OOM_SCORE_ADJ_MIN, which the kernel's OOM killer
 * never picks: proc_pid_oom_score_adj(5)), and earlyoom, when installed, gets the cluster's memory
 * floor. The plan is pure (node facts in, files out); the shell probes and applies it over the
 * node's own SSH transport, with `sudo -n` so that no password is ever asked for (sudo(8): -n,
 * non-interactive, exits with an error where a password would be needed).
 */
import type { ClusterNode } from "../cluster/cluster.js";
import { dumpTree } from "../cluster/sysfs.js";
import { KIB_PER_GIB } from "../memory/meminfo.js";

/** The first line of every file launcher writes: --undo removes only files that start with it. */
export const MARK = "# Written by `launcher nodes protect`; `launcher nodes protect --undo` removes it.";
const DROPIN = "50-launcher-protect.conf";

/** The units launcher may touch, and where their drop-ins go: paths are built from this table only. */
export const SSH_UNITS = ["ssh.service", "sshd.service"] as const;
export const UNITS = [...SSH_UNITS, "docker.service", "earlyoom.service"] as const;
export type Unit = (typeof UNITS)[number];
export const dropinPath = (unit: Unit): string => `/etc/systemd/system/${unit}.d/${DROPIN}`;
/** Where Debian's and Ubuntu's earlyoom package puts the program (a path launcher names, never one it reads). */
export const EARLYOOM = "/usr/bin/earlyoom";

/** What one node says about itself (PROTECT_PROBE, read). */
export interface ProtectFacts {
  /** sd_booted(3): systemd runs when /run/systemd/system exists. */
  readonly systemd: boolean;
  /** yes: `sudo -n true` succeeded (no password needed); password: it failed; missing: no sudo command. */
  readonly sudo: "yes" | "password" | "missing";
  readonly earlyoom_installed: boolean;
  /** The units that exist under their own name (systemctl show's Id equals the name: not an alias). */
  readonly units: readonly Unit[];
  /** Whether earlyoom runs now (systemctl is-active). */
  readonly earlyoom_active: boolean;
  /** Launcher's drop-ins as they are on the node now (the first 4 KiB), by path. */
  readonly files: Readonly<Record<string, string>>;
}

/**
 * One round trip. $@ are launcher's drop-in paths (from UNITS): each that exists is printed in
 * the sysfs dump's `==> path <==` format, bounded. systemctl show -p Id prints the unit's real
 * name, the same for an alias (systemctl(1) show).
 */
export const PROTECT_PROBE = `echo "@@systemd"; [ -d /run/systemd/system ] && echo yes || echo no
echo "@@sudo"; if ! command -v sudo >/dev/null 2>&1; then echo missing; elif sudo -n true >/dev/null 2>&1; then echo yes; else echo password; fi
echo "@@earlyoom"; [ -x ${EARLYOOM} ] && echo yes || echo no
echo "@@earlyoom-active"; systemctl is-active earlyoom.service 2>/dev/null | head -1
echo "@@units"
for u in ${UNITS.join(" ")}; do
  echo "$u $(systemctl show -p LoadState --value "$u" 2>/dev/null | head -1) $(systemctl show -p Id --value "$u" 2>/dev/null | head -1)"
done
echo "@@files"
for f in "$@"; do [ -f "$f" ] && { printf '==> %s <==\\n' "$f"; head -c 4096 "$f"; echo; }; done
true`;

function probeSections(text: string): Map<string, string> {
  const out = new Map<string, string>();
  let name: string | undefined;
  for (const line of text.split("\n")) {
    const m = /^@@([\w-]+)$/.exec(line);
    if (m) out.set((name = m[1] as string), "");
    else if (name !== undefined) out.set(name, `${out.get(name)}${out.get(name) === "" ? "" : "\n"}${line}`);
  }
  return out;
}

/** PROTECT_PROBE's output, read. Node output only decides among launcher's own names and paths. */
export function readProtectProbe(text: string): ProtectFacts {
  const s = probeSections(text);
  const yes = (k: string): boolean => s.get(k)?.trim() === "yes";
  const units = (s.get("units") ?? "").split("\n").flatMap((l): Unit[] => {
    const [name, load, id] = l.trim().split(/\s+/);
    const unit = UNITS.find((u) => u === name);
    return unit !== undefined && load === "loaded" && id === unit ? [unit] : [];
  });
  const tree = dumpTree(s.get("files") ?? "");
  const files = Object.fromEntries(UNITS.map(dropinPath).flatMap((p) => (tree.read(p) === undefined ? [] : [[p, `${tree.read(p)}\n`]])));
  const sudo = s.get("sudo")?.trim();
  return { systemd: yes("systemd"), sudo: sudo === "yes" || sudo === "missing" ? sudo : "password", earlyoom_installed: yes("earlyoom"), units, earlyoom_active: s.get("earlyoom-active")?.trim() === "active", files };
}

/** One file launcher would write or remove, and how it stands on the node now. */
export interface FileChange {
  readonly action: "write" | "remove";
  readonly unit: Unit;
  readonly path: string;
  /**
   * absent: not there; same: there with this content; differs: launcher's, with other content;
   * ours: launcher's (what --undo removes); foreign: there and not launcher's (never touched).
   */
  readonly now: "absent" | "same" | "differs" | "ours" | "foreign";
  /** What is written (write only). */
  readonly content?: string;
}

/** Something launcher cannot do on a node: what, why, and what the user can do. */
export interface Cannot {
  readonly what: string;
  readonly why: string;
  readonly fix: string;
}

export interface NodePlan {
  readonly node: string;
  readonly changes: readonly FileChange[];
  readonly cannot: readonly Cannot[];
  /** When what is written takes effect. */
  readonly effect: readonly string[];
}

export const oomDropin = (daemon: string): string =>
  `${MARK}\n# ${daemon} is never the OOM killer's pick (OOMScoreAdjust=, systemd.exec(5)); applies at the service's next start.\n[Service]\nOOMScoreAdjust=-1000\n`;

/**
 * earlyoom(1): -M SIZE is the available-memory minimum in KiB, below which it kills the process
 * with the highest oom_score; it acts when free swap is below its -s percent too, so -s 100 lets
 * the memory floor alone decide. -r 60 reports memory once a minute in the journal.
 */
export const earlyoomDropin = (floorGiB: number): string =>
  `${MARK}\n# earlyoom kills the largest process when MemAvailable falls below the cluster's memory_floor (${floorGiB} GiB).\n[Service]\nExecStart=\nExecStart=${EARLYOOM} -M ${Math.round(floorGiB * KIB_PER_GIB)} -s 100 -r 60\n`;

const stateOf = (facts: ProtectFacts, path: string, content: string): FileChange["now"] => {
  const now = facts.files[path];
  if (now === undefined) return "absent";
  if (!now.startsWith(MARK)) return "foreign";
  return now === content ? "same" : "differs";
};

/** The drop-ins to write on one node: sshd's under its real unit name, dockerd's, earlyoom's. */
function wanted(facts: ProtectFacts, floorGiB: number): { unit: Unit; content: string }[] {
  const ssh = SSH_UNITS.find((u) => facts.units.includes(u));
  return [
    ...(ssh === undefined ? [] : [{ unit: ssh, content: oomDropin("sshd") }]),
    ...(facts.units.includes("docker.service") ? [{ unit: "docker.service" as const, content: oomDropin("dockerd") }] : []),
    ...(facts.earlyoom_installed && facts.units.includes("earlyoom.service") ? [{ unit: "earlyoom.service" as const, content: earlyoomDropin(floorGiB) }] : []),
  ];
}

const SUDO_WHY: Record<"password" | "missing", (user: string) => string> = {
  password: (user) => `sudo asks ${user} for a password here (sudo -n true failed), and launcher never types one`,
  missing: () => "there is no sudo command on this node",
};

/** What launcher cannot do on a node whose facts these are; `acting`: --apply was given. */
function cannotOn(node: ClusterNode, facts: ProtectFacts, acting: boolean, undo: boolean): Cannot[] {
  const out: Cannot[] = [];
  if (!facts.systemd) out.push({ what: "write systemd drop-ins", why: "systemd does not run on this node (/run/systemd/system is absent)", fix: "set oom_score_adj of sshd and dockerd with this node's own init system" });
  else if (!undo) {
    if (!SSH_UNITS.some((u) => facts.units.includes(u))) out.push({ what: "protect sshd", why: "no ssh.service or sshd.service unit is loaded", fix: "find sshd's unit (systemctl status sshd) and give it OOMScoreAdjust=-1000 in a drop-in" });
    if (!facts.units.includes("docker.service")) out.push({ what: "protect dockerd", why: "no docker.service unit is loaded", fix: "give the unit that runs dockerd OOMScoreAdjust=-1000 in a drop-in" });
    if (!facts.earlyoom_installed || !facts.units.includes("earlyoom.service")) out.push({ what: "set earlyoom to the memory floor", why: `earlyoom is not installed (no ${EARLYOOM} or earlyoom.service); launcher installs no packages`, fix: "sudo apt-get install earlyoom, then run `launcher nodes protect --apply` again" });
  }
  if (acting && facts.sudo !== "yes") out.push({ what: "change anything", why: SUDO_WHY[facts.sudo](node.user ?? "the SSH user"), fix: "allow this user passwordless sudo, or write the files shown by `launcher nodes protect` yourself" });
  return out;
}

const EFFECT = [
  "sshd and dockerd: a drop-in's OOMScoreAdjust= applies at the service's next start; --apply also writes -1000 to the running daemons' /proc/PID/oom_score_adj, so they are protected now, without a restart (proc_pid_oom_score_adj(5))",
  "earlyoom: restarted by --apply when it runs (no SSH session depends on it); when it does not run, `sudo systemctl enable --now earlyoom` starts it",
];
const UNDO_EFFECT = ["the running sshd and dockerd keep -1000 until their next start; earlyoom is restarted with its own settings when it runs"];

/**
 * One node's plan. Protect: the drop-ins to write (none for a unit that is not there). Undo: the
 * launcher files there to remove (a file without launcher's mark is never touched).
 */
export function protectPlan(node: ClusterNode, facts: ProtectFacts, floorGiB: number, options: { apply: boolean; undo: boolean }): NodePlan {
  const cannot = cannotOn(node, facts, options.apply, options.undo);
  if (options.undo) {
    const changes = UNITS.flatMap((unit): FileChange[] => {
      const path = dropinPath(unit);
      const now = facts.files[path];
      return now === undefined ? [] : [{ action: "remove", unit, path, now: now.startsWith(MARK) ? "ours" : "foreign" }];
    });
    return { node: node.name, changes, cannot, effect: UNDO_EFFECT };
  }
  const changes = facts.systemd ? wanted(facts, floorGiB).map(({ unit, content }): FileChange => ({ action: "write", unit, path: dropinPath(unit), now: stateOf(facts, dropinPath(unit), content), content })) : [];
  return { node: node.name, changes, cannot, effect: EFFECT };
}

/** A plan that has something to do and may: sudo works and something differs. */
export const actionable = (plan: NodePlan, facts: ProtectFacts): boolean => facts.sudo === "yes" && facts.systemd && plan.changes.some((c) => c.now !== "same" && c.now !== "foreign");

/**
 * Runs as root (sudo -n sh -c APPLY_SCRIPT sh OP ARGS...). write PATH CONTENT: written aside and
 * renamed into place; remove PATH: only when its first line is launcher's mark; adj UNIT: the
 * unit's running main process gets -1000 now. Then systemd reloads its units (systemctl(1)
 * daemon-reload), and a running earlyoom restarts (try-restart starts nothing that is stopped).
 * Nothing that carries this SSH session is restarted.
 */
export const APPLY_SCRIPT = `set -e
mark="$1"; shift
while [ $# -gt 0 ]; do
  op="$1"; shift
  case "$op" in
    write) mkdir -p "$(dirname "$1")"; printf '%s' "$2" > "$1.launcher-new"; chmod 644 "$1.launcher-new"; mv -f "$1.launcher-new" "$1"; shift 2 ;;
    remove) if [ "$(head -n 1 "$1" 2>/dev/null)" = "$mark" ]; then rm -f "$1"; rmdir "$(dirname "$1")" 2>/dev/null || true; fi; shift ;;
    adj) pid=$(systemctl show -p MainPID --value "$1" 2>/dev/null); if [ "\${pid:-0}" -gt 0 ] 2>/dev/null; then echo -1000 > "/proc/$pid/oom_score_adj"; fi; shift ;;
    *) echo "unknown step $op" >&2; exit 2 ;;
  esac
done
systemctl daemon-reload
systemctl try-restart earlyoom.service 2>/dev/null || true`;

/** The argv after APPLY_SCRIPT for a plan: launcher's own paths, contents and unit names only. */
export function applyArgs(plan: NodePlan): string[] {
  const steps = plan.changes.filter((c) => c.now !== "same" && c.now !== "foreign");
  const files = steps.flatMap((c) => (c.action === "write" ? ["write", c.path, c.content ?? ""] : ["remove", c.path]));
  const adj = plan.changes.filter((c) => c.action === "write" && c.unit !== "earlyoom.service").flatMap((c) => ["adj", c.unit]);
  return [MARK, ...files, ...adj];
}
