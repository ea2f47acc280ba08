/**
 * The node guard's pure core: a memory guard that runs ON a node beside a deployment's containers,
 * so that it keeps guarding when the control machine goes away (its SSH session closed, its Wi-Fi
 * down, the daemon stopped). The shell that starts and removes it is src/memory/node-guard-shell.ts.
 *
 * Why a detached host process and not a container of its own: it needs only sh, /proc and the
 * docker CLI the node has anyway, and no image to ship, pull or keep in step; a container would
 * need an image with a shell and the docker socket mounted into it. The process is started with
 * setsid(1) and nohup(1) (util-linux setsid: a new session, no controlling terminal; nohup:
 * SIGHUP ignored), its standard streams on files, so that sshd's session ends at once and nothing
 * of it reaches the guard (openssh-portable session.c: the session closes when the command's
 * streams do). Its pid and report live under ~/.cache/launcher/guard/<deployment>/ on the node.
 *
 * Each turn reads /proc/meminfo with the shell's own `read` (no process per sample but `sleep`)
 * and compares MemAvailable (proc(5): "An estimate of how much memory is available for starting
 * new applications, without swapping", Linux 3.14+) with its floor in KiB (nodeGuardFloorKiB). Below it, the
 * guard runs `docker kill` on this deployment's containers on its node, found ahead by their
 * launcher.deployment label and refreshed every few seconds; the same look ends the guard once
 * those containers are gone.
 */

import { DEPLOYMENT_NAME } from "../config/kinds.js";
import { DEPLOYMENT_LABEL, LABELS } from "../contract/deployment.js";
import type { OutageCause } from "../contract/outage.js";
import { KIB_PER_GIB } from "./memory-watch.js";

/** Samples per second is 1 / this: ten a second, so that the kill comes well within 250 ms of the crossing. */
export const NODE_GUARD_INTERVAL_SECONDS = 0.1;
/** Every this many samples (about 3 s) the guard starts a look for the deployment's containers, unless one still runs. */
export const NODE_GUARD_LOOK_EVERY = 30;
/** Every this many samples (about 1 s) the guard rewrites its heartbeat file. */
export const NODE_GUARD_BEAT_EVERY = 10;
/**
 * A sample that comes this long after the one before (nominally NODE_GUARD_INTERVAL_SECONDS
 * apart) says the guard itself did not run meanwhile: the node stalled (frozen, or every process
 * of it stopped), not only its link. The gap is one turn of the loop, which never waits on
 * dockerd (its looks run beside it). Far past the interval, so that a loaded node's late turn is
 * no stall either.
 */
export const NODE_GUARD_STALL_MS = 5000;
/** The longest a look's `docker ps` may take (timeout(1), where the node has one that takes --foreground): a wedged dockerd never keeps the guard from looking again. */
export const NODE_GUARD_LOOK_MAX_SECONDS = 30;
/** A report past this many bytes is moved aside (report.1) when a guard starts: at most twice this on the node. */
export const NODE_GUARD_REPORT_MAX_BYTES = 64 * 1024;
/** The most of a report a reader takes: the tail of the report and the heartbeat file. */
export const NODE_GUARD_READ_MAX_BYTES = 16 * 1024;

/** The guard's folder under the node user's home; the deployment's name is its last component. */
export const NODE_GUARD_HOME = ".cache/launcher/guard";

/**
 * `stamp`, a shell function of the start script and the guard loop: epoch milliseconds in $t (GNU
 * date %3N); a date(1) without %3N (busybox prints it as is) gives its seconds times 1000, anything
 * else 0: $t is always a number, never a word that stops dash's arithmetic or spoils a report line.
 */
const NODE_GUARD_STAMP = `stamp() {
  t=$(date +%s%3N)
  case $t in
    [1-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]) ;;
    [1-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]*) t=\${t%"\${t#??????????}"}000 ;;
    *) t=0 ;;
  esac
}`;

/**
 * `up`, a shell function of the guard loop: the time since boot in centiseconds in $u, read with
 * the shell's own `read` (no process). Linux prints it "%lu.%02lu" (fs/proc/uptime.c,
 * uptime_proc_show, from ktime_get_boottime: it runs on through a suspend, proc(5)); an answer of
 * another shape leaves $u empty. Unlike the wall clock, it never jumps with a clock that is set.
 */
const NODE_GUARD_UPTIME = `up() {
  u=
  read -r u _ </proc/uptime
  case $u in *.[0-9][0-9]) u=\${u%.*}\${u#*.} ;; *) u= ;; esac
  case $u in *[!0-9]*) u= ;; esac
  while :; do case $u in 0?*) u=\${u#0} ;; *) break ;; esac; done
}`;

/**
 * The guard loop, run detached on the node. $1 is its folder (already its working directory),
 * $2 the floor in KiB, $3 the label filter of the deployment's containers, $4 the interval,
 * $5 the samples between looks, $6 the samples between heartbeats, $7 the gap between two samples
 * that is a stall (ms), $8 a second label filter, the launch's (empty: none), $9 the longest a
 * look may take (s, NODE_GUARD_LOOK_MAX_SECONDS). Docker ANDs label filters (moby
 * api/types/filters MatchKVList: every label asked must match; moby/moby#40286: `--filter
 * label=foo --filter label=bar` is hasLabel(foo) && hasLabel(bar)), so a guard of an earlier
 * launch of the same name kills nothing of a newer one. It appends events to `report` (`tripped
 * MS available=KIB floor=KIB killed=IDS`, `stalled MS gap=MS`, `ended MS why`) and rewrites
 * `heartbeat` (`MS available=KIB`) about once a second; MS is epoch milliseconds (`stamp`). The
 * kill comes before any date is taken, so that nothing delays it.
 *
 * Only the first look is waited for, so that the guard starts knowing what to kill. Every later
 * `docker ps` runs in the background, one at a time: its ids go to look.PID.ids (with a last
 * line `.`, so that an answer cut short, by a full disk or a kill, never passes for a whole one),
 * then its sequence number and exit code to look.PID.end (PID the guard's, so that a look an
 * earlier guard of this folder left running never writes this one's), and the sample after it
 * ended takes them.
 * No sample waits on dockerd, which answers slowly on a node short of memory, when the guard is
 * needed most, and which stops with a frozen node. So a stall, the time since boot (`up`) from one
 * sample to the next, is always the guard not running, never a look it waited on. A failed look
 * keeps the ids it had; only a look that answered ends the guard, when it lists none (a guard
 * whose looks all fail runs on until its folder is removed: `down`). Each look is bounded
 * (NODE_GUARD_LOOK_MAX_SECONDS). dash keeps a finished background job until `jobs` or `wait`
 * reports it (dash src/jobs.c): `jobs` at each look taken frees those that have exited, so at most
 * one lingers. The guard ends with its process group (quit), a look under way with it.
 */
export const NODE_GUARD_SCRIPT = `floor=$2 filter=$3 interval=$4 every=$5 beat=$6 stall=$7 launch=$8 most=$9
echo $$ >pid
${NODE_GUARD_STAMP}
${NODE_GUARD_UPTIME}
# --foreground keeps timeout in the guard's process group (without it, coreutils timeout.c calls
# setpgid(0, 0), and the guard's end would miss the look); a timeout(1) without it is not used.
bound=
timeout --foreground -s KILL 9 true 2>/dev/null && bound="timeout --foreground -s KILL $most"
ps_ids() {
  $bound docker ps --quiet --no-trunc --filter "label=$filter" \${launch:+--filter} \${launch:+"label=$launch"} 2>/dev/null
}
# The report's last line ($1, the time, the rest), then the guard ends with its process group
# (its own SIGKILL ends it there; exit only when it leads none).
quit() {
  what=$1
  shift
  stamp
  echo "$what $t" "$@" >>report
  rm -f pid
  kill -9 "-$$" 2>/dev/null
  exit 0
}
seq=0 pending=
look_start() {
  seq=$((seq + 1)) pending=$seq
  { { ps_ids && echo .; } >look.$$.ids; echo "$pending $?" >look.$$.end; } &
}
# Whether the pending look has ended, and answered: its ids taken.
look_take() {
  e= c=
  [ -f look.$$.end ] && read -r e c _ <look.$$.end
  [ "$e" = "$pending" ] || return 1
  pending=
  jobs >/dev/null
  [ "$c" = 0 ] || return 1
  found= whole=
  { while read -r id _; do [ "$id" = . ] && whole=1 && break; found="$found $id"; done; } <look.$$.ids
  [ -n "$whole" ] || return 1
  ids=$found
}
ids=$(ps_ids)
look_start
n=0
up
last=$u
while :; do
  a=
  while read -r k v _; do
    case $k in MemAvailable:) a=$v; break ;; esac
  done </proc/meminfo
  if [ -n "$a" ] && [ "$a" -lt "$floor" ]; then
    [ -n "$ids" ] && docker kill -- $ids >/dev/null 2>&1
    quit tripped "available=$a floor=$floor killed=" $ids
  fi
  # A sample far past its time: the guard itself did not run since the last (the node stalled).
  up
  if [ -n "$u" ] && [ -n "$last" ]; then
    gap=$(((u - last) * 10))
    if [ "$gap" -gt "$stall" ]; then stamp; echo "stalled $t gap=$gap" >>report; fi
  fi
  last=$u
  n=$((n + 1))
  if [ $((n % beat)) -eq 0 ]; then
    stamp
    echo "$t available=$a" >heartbeat
  fi
  # Nothing left to kill (gone, or never seen), or its folder removed (down): the guard ends.
  if [ -n "$pending" ] && look_take && [ -z "$ids" ]; then quit ended containers-gone; fi
  [ -d "$1" ] || quit ended containers-gone
  [ -z "$pending" ] && [ $((n % every)) -eq 0 ] && look_start
  sleep "$interval"
done`;

/**
 * Ends the guard whose folder is $d, with its process group (the look it runs beside it, its
 * sleep), only when the pid in its pid file is still a process whose working directory is that
 * folder (resolved: /proc/PID/cwd names it without symbolic links) and not this script itself (a
 * pid file left by a guard that died with its node may name any later process): a pid reused by
 * another process is never killed (proc(5) /proc/PID/cwd). The guard leads its group (setsid), so
 * the group's id is its pid; one that leads none is ended alone.
 */
const NODE_GUARD_END = `p=$(cat "$d/pid" 2>/dev/null)
r=$(cd "$d" 2>/dev/null && pwd -P)
case $p in ''|*[!0-9]*|$$) ;; *) [ -n "$r" ] && [ "$(readlink "/proc/$p/cwd" 2>/dev/null)" = "$r" ] && { kill -9 "-$p" 2>/dev/null || kill -9 "$p" 2>/dev/null; } ;; esac`;

/**
 * Starts a guard for one deployment on the node: $1 the deployment, $2 the guard loop, the rest
 * its arguments. A node without setsid(1) fails the start before anything, saying so. A guard of
 * the same deployment already there is ended first (NODE_GUARD_END), and the look files of the
 * guards before it removed. setsid does not fork here: a background job of a non-interactive sh
 * is no process group leader (util-linux sys-utils/setsid.c forks only for a leader), so $! is
 * the guard's own pid, written before this script returns: a removal that comes at once finds it.
 * The report's `started MS floor=KIB stall=MS` line comes first, before any line of this guard's;
 * `stall=` says this guard notes its stalls (one that does not, of an older launcher, never says
 * it kept beating).
 */
export const NODE_GUARD_START_SCRIPT = `d=$HOME/${NODE_GUARD_HOME}/$1
guard=$2
shift 2
command -v setsid >/dev/null || { echo "setsid(1) is not installed on this node (util-linux)" >&2; exit 1; }
mkdir -p "$d" && cd "$d" && d=$(pwd -P) || exit 1
${NODE_GUARD_STAMP}
${NODE_GUARD_END}
rm -f look.*
[ -f report ] && [ "$(wc -c <report)" -gt ${NODE_GUARD_REPORT_MAX_BYTES} ] && mv -f report report.1
stamp
echo "started $t floor=$1\${6:+ stall=$6}" >>report
setsid nohup sh -c "$guard" sh "$d" "$@" </dev/null >/dev/null 2>&1 &
echo $! >pid
echo "guard $!"`;

/**
 * Ends and removes each named deployment's guard on the node: its processes (NODE_GUARD_END)
 * and its folder. What the report said is printed first, bounded, each under a `== NAME` line,
 * for the caller to keep; each name line starts a line of its own (a report without its last
 * newline ends before it).
 */
export const NODE_GUARD_STOP_SCRIPT = `for name in "$@"; do
  d=$HOME/${NODE_GUARD_HOME}/$name
  [ -d "$d" ] || continue
  ${NODE_GUARD_END}
  printf '\\n== %s\\n' "$name"
  tail -c ${NODE_GUARD_READ_MAX_BYTES} "$d/report" 2>/dev/null
  rm -rf -- "$d"
done
exit 0`;

/**
 * Prints, for each named deployment ($2...), a `== NONCE NAME` line ($1 the reader's nonce, new
 * each run), its heartbeat's first line and the tail of its report, each bounded
 * (NODE_GUARD_READ_MAX_BYTES in all per deployment); a deployment without a guard there prints its
 * name line only. Each name line starts a line of its own (a report cut mid-line, or without its
 * last newline, ends before it), and a report's own text cannot forge one: it does not know the
 * nonce.
 */
export const NODE_GUARD_LOOK_SCRIPT = `nonce=$1
shift
for name in "$@"; do
  d=$HOME/${NODE_GUARD_HOME}/$name
  printf '\\n== %s %s\\n' "$nonce" "$name"
  [ -d "$d" ] || continue
  h=$(head -c 128 "$d/heartbeat" 2>/dev/null | head -n 1)
  printf 'heartbeat %s\\n' "$h"
  tail -c ${NODE_GUARD_READ_MAX_BYTES - 256} "$d/report" 2>/dev/null
done
exit 0`;

/** The most a read of `guards` guards' reports takes from a node: each one's bounded tail and its name lines. */
export const guardReadBound = (guards: number): number => guards * (NODE_GUARD_READ_MAX_BYTES + 512);

/** A look's nonce: what a name line carries so that no report line passes for one. */
const LOOK_NONCE = /^[0-9a-f]{16,64}$/;

/** Prints the tail of a deployment's guard report on the node ($1 the deployment); none: nothing. */
export const NODE_GUARD_READ_SCRIPT = `tail -c ${NODE_GUARD_READ_MAX_BYTES} "$HOME/${NODE_GUARD_HOME}/$1/report" 2>/dev/null
exit 0`;

/** A deployment name the guard's folder may carry: the plan's own kind (no '/', never '.' first). */
export const guardableName = (deployment: string): boolean => DEPLOYMENT_NAME.check(deployment) === undefined;

/** The floor in whole KiB, as the guard compares it with MemAvailable. */
export const floorKiB = (floorGiB: number): number => Math.max(0, Math.round(floorGiB * KIB_PER_GIB));

/** How far below the node's floor its own guard kills: 1 GiB, or a quarter of a floor under 4 GiB. */
export const NODE_GUARD_MARGIN_GIB = 1;

/**
 * The node guard's floor: the node's memory_floor less NODE_GUARD_MARGIN_GIB (a quarter of the
 * floor at most). The node guard is the last line: while launcher's own guard watches the node
 * (`up`'s during a boot, the daemon's after), that one crosses first and trips with its whole
 * report, its kill on every node and its record; the node's own guard kills alone when nobody
 * else can (the control machine asleep, its link down, no daemon), or when memory falls so fast
 * that it crosses both at once.
 */
export const nodeGuardFloorKiB = (floorGiB: number): number => floorKiB(floorGiB - Math.min(NODE_GUARD_MARGIN_GIB, floorGiB / 4));

/** A launch id the guard filters on: the shape boot.ts's newBootId gives, bounded as the label's schema is. */
const LAUNCH_ID = /^[0-9a-zA-Z_.-]{1,64}$/;

/** argv that starts the guard of `deployment` on a node whose memory_floor is `floorGiB` (the transport quotes it, through shellQuote). */
export function nodeGuardStartArgv(deployment: string, floorGiB: number, launch?: string): string[] {
  if (!guardableName(deployment)) throw new Error(`nodeGuardStartArgv: ${JSON.stringify(deployment)} is no deployment name`);
  return [
    "sh",
    "-c",
    NODE_GUARD_START_SCRIPT,
    "sh",
    deployment,
    NODE_GUARD_SCRIPT,
    String(nodeGuardFloorKiB(floorGiB)),
    `${DEPLOYMENT_LABEL}=${deployment}`,
    String(NODE_GUARD_INTERVAL_SECONDS),
    String(NODE_GUARD_LOOK_EVERY),
    String(NODE_GUARD_BEAT_EVERY),
    String(NODE_GUARD_STALL_MS),
    launch === undefined || !LAUNCH_ID.test(launch) ? "" : `${LABELS.boot}=${launch}`,
    String(NODE_GUARD_LOOK_MAX_SECONDS),
  ];
}

/** argv that ends and removes the guards of `deployments` on a node; names that are no deployment name are left out. */
export function nodeGuardStopArgv(deployments: readonly string[]): string[] | undefined {
  const names = [...new Set(deployments)].filter(guardableName);
  return names.length === 0 ? undefined : ["sh", "-c", NODE_GUARD_STOP_SCRIPT, "sh", ...names];
}

/** One event of a guard's report, as read back (untrusted: it comes from the node). */
export type NodeGuardEvent =
  | { readonly kind: "started"; readonly atMs: number; readonly floorKiB: number; readonly stallMs?: number }
  | { readonly kind: "tripped"; readonly atMs: number; readonly availableKiB: number; readonly floorKiB: number; readonly killed: readonly string[] }
  | { readonly kind: "stalled"; readonly atMs: number; readonly gapMs: number }
  /**
   * A look (`docker ps`) that took past a stall's length, ending at atMs: the guard waited on it,
   * and saw nothing else meanwhile. Only a guard that waits on its looks writes it (an older
   * launcher's, which may still run beside a deployment); NODE_GUARD_SCRIPT's looks run beside it.
   */
  | { readonly kind: "waited"; readonly atMs: number; readonly lookMs: number }
  | { readonly kind: "ended"; readonly atMs: number; readonly why: string };

const MAX_LINE = 4096;
const MAX_EVENTS = 64;
const MAX_KILLED = 64;
const CONTAINER_ID = /^[0-9a-f]{12,64}$/;

/** Each line the guard writes, exactly: anything else in a report is not the guard's and is left out. */
const LINE_READERS: readonly ((line: string) => NodeGuardEvent | undefined)[] = [
  (line) => {
    const m = /^started (\d{1,16}) floor=(\d{1,16})(?: stall=(\d{1,16}))?$/.exec(line);
    return m === null ? undefined : { kind: "started", atMs: Number(m[1]), floorKiB: Number(m[2]), ...(m[3] === undefined ? {} : { stallMs: Number(m[3]) }) };
  },
  (line) => {
    const m = /^tripped (\d{1,16}) available=(\d{1,16}) floor=(\d{1,16}) killed=([0-9a-f ]*)$/.exec(line);
    if (m === null) return undefined;
    const killed = (m[4] ?? "").split(" ").filter((id) => CONTAINER_ID.test(id)).slice(0, MAX_KILLED);
    return { kind: "tripped", atMs: Number(m[1]), availableKiB: Number(m[2]), floorKiB: Number(m[3]), killed };
  },
  (line) => {
    const m = /^stalled (\d{1,16}) gap=(\d{1,16})$/.exec(line);
    return m === null ? undefined : { kind: "stalled", atMs: Number(m[1]), gapMs: Number(m[2]) };
  },
  (line) => {
    const m = /^waited (\d{1,16}) look=(\d{1,16})$/.exec(line);
    return m === null ? undefined : { kind: "waited", atMs: Number(m[1]), lookMs: Number(m[2]) };
  },
  (line) => {
    const m = /^ended (\d{1,16}) (containers-gone)$/.exec(line);
    return m === null ? undefined : { kind: "ended", atMs: Number(m[1]), why: m[2] as string };
  },
];

/**
 * A report's text -> its events, newest last, at most MAX_EVENTS. Every line is untrusted (it comes
 * from the node): one that is not exactly a guard's line (too long, an unknown word, a figure that
 * is no number, a killed id that is not hex) is left out, never passed on.
 */
export function parseNodeGuardReport(text: string): NodeGuardEvent[] {
  const events: NodeGuardEvent[] = [];
  for (const line of text.slice(-NODE_GUARD_READ_MAX_BYTES).split("\n")) {
    if (line.length > MAX_LINE) continue;
    for (const read of LINE_READERS) {
      const event = read(line);
      if (event !== undefined) {
        events.push(event);
        break;
      }
    }
  }
  return events.slice(-MAX_EVENTS);
}

/** The events of the guard started last: from its report's last `started` line on (all of them when none is left). */
export function sinceLastStart(events: readonly NodeGuardEvent[]): readonly NodeGuardEvent[] {
  const since = events.map((e) => e.kind).lastIndexOf("started");
  return events.slice(Math.max(0, since));
}

/** The trip of the guard started last (its report's last `started` line), if it tripped. */
export function lastTrip(events: readonly NodeGuardEvent[]): Extract<NodeGuardEvent, { kind: "tripped" }> | undefined {
  return sinceLastStart(events).find((e): e is Extract<NodeGuardEvent, { kind: "tripped" }> => e.kind === "tripped");
}

/** The heartbeat file's text -> when and what the guard last sampled, or undefined. */
export function parseNodeGuardHeartbeat(text: string): { readonly atMs: number; readonly availableKiB: number } | undefined {
  const m = /^(\d{1,16}) available=(\d{1,16})\n?$/.exec(text.slice(0, MAX_LINE));
  return m === null ? undefined : { atMs: Number(m[1]), availableKiB: Number(m[2]) };
}

/** The stop script's output -> each deployment's report text (the `== NAME` lines name only names asked for). */
export function splitStoppedReports(out: string, asked: readonly string[]): Map<string, string> {
  const reports = new Map<string, string>();
  let current: string | undefined;
  for (const line of out.split("\n")) {
    const m = /^== (.+)$/.exec(line);
    if (m !== null && asked.includes(m[1] as string)) {
      current = m[1] as string;
      reports.set(current, "");
    } else if (current !== undefined) reports.set(current, `${reports.get(current) ?? ""}${line}\n`);
  }
  return reports;
}

/** argv that reads the heartbeat and report of each named guard on a node, its name lines carrying `nonce` (the transport quotes it). */
export function nodeGuardLookArgv(nonce: string, deployments: readonly string[]): string[] | undefined {
  if (!LOOK_NONCE.test(nonce)) throw new Error(`nodeGuardLookArgv: ${JSON.stringify(nonce)} is no nonce`);
  const names = [...new Set(deployments)].filter(guardableName);
  return names.length === 0 ? undefined : ["sh", "-c", NODE_GUARD_LOOK_SCRIPT, "sh", nonce, ...names];
}

/**
 * The look script's output -> each asked deployment's heartbeat and report events (untrusted:
 * parsed, bounded). Only a line `== NONCE NAME` of this look's nonce and a name asked starts a
 * deployment's part; its heartbeat is the line right after it, the rest its report.
 */
export function splitLookedGuards(out: string, asked: readonly string[], nonce: string): Map<string, { readonly heartbeat?: NodeGuardHeartbeat; readonly events: NodeGuardEvent[] }> {
  const texts = new Map<string, string[]>();
  let current: string[] | undefined;
  const header = `== ${nonce} `;
  for (const line of out.slice(0, guardReadBound(asked.length)).split("\n")) {
    const name = line.startsWith(header) ? line.slice(header.length) : undefined;
    if (name !== undefined && asked.includes(name)) texts.set(name, (current = []));
    else current?.push(line);
  }
  return new Map(
    [...texts].map(([name, lines]) => {
      const beat = lines[0]?.startsWith("heartbeat ") === true ? lines[0] : undefined;
      const heartbeat = beat === undefined ? undefined : parseNodeGuardHeartbeat(beat.slice("heartbeat ".length));
      return [name, { ...(heartbeat === undefined ? {} : { heartbeat }), events: parseNodeGuardReport(lines.slice(beat === undefined ? 0 : 1).join("\n")) }];
    }),
  );
}

export type NodeGuardHeartbeat = NonNullable<ReturnType<typeof parseNodeGuardHeartbeat>>;

/**
 * How far the node's clock and the daemon's may differ, and a poll's lag, when a guard's events
 * (the node's clock) are set against an outage's times (the daemon's).
 */
export const OUTAGE_CLOCK_SLACK_MS = 5000;

type LookedGuard = { readonly heartbeat?: NodeGuardHeartbeat; readonly events: readonly NodeGuardEvent[] };

/** Whether an event that ended at `atMs` after `lastedMs` overlaps the outage (the node's clock against the daemon's, slack given). */
const overlaps = (atMs: number, lastedMs: number, sinceMs: number, endedMs: number): boolean => atMs >= sinceMs - OUTAGE_CLOCK_SLACK_MS && atMs - lastedMs <= endedMs + OUTAGE_CLOCK_SLACK_MS;

/** The longest stall any guard noted that overlaps the outage. */
function longestStall(guards: readonly LookedGuard[], sinceMs: number, endedMs: number): Extract<NodeGuardEvent, { kind: "stalled" }> | undefined {
  const stalls = guards.flatMap((g) => g.events.filter((e): e is Extract<NodeGuardEvent, { kind: "stalled" }> => e.kind === "stalled" && overlaps(e.atMs, e.gapMs, sinceMs, endedMs)));
  return stalls.sort((a, b) => b.gapMs - a.gapMs)[0];
}

/** Whether the guard waited on a long look during the outage: it cannot say it ran through it. */
const waitedDuring = (g: LookedGuard, sinceMs: number, endedMs: number): boolean => g.events.some((e) => e.kind === "waited" && overlaps(e.atMs, e.lookMs, sinceMs, endedMs));

/** Whether the guard started last ended (or tripped) before `beforeMs`: it says nothing of what came after. */
export const endedBefore = (g: LookedGuard, beforeMs: number): boolean => sinceLastStart(g.events).some((e) => (e.kind === "ended" || e.kind === "tripped") && e.atMs < beforeMs);

/**
 * What a node's guards say of an outage from `sinceMs` to `endedMs` (the daemon's clock), read
 * once the node answered again. A stall of a guard that overlaps it: when it covers the outage
 * (all of it but the clocks' slack at each end) the node itself stalled (frozen); a shorter one
 * says only that the guard paused that long during it (a node that lost its link may stall a
 * moment too). Else a guard that notes its stalls, started before it, ended not before its end,
 * beats now and did not wait on a long look during it kept beating through it: the node ran. Else
 * nothing is known.
 */
export function judgeOutage(guards: readonly LookedGuard[], sinceMs: number, endedMs: number): OutageCause | undefined {
  const longest = longestStall(guards, sinceMs, endedMs);
  if (longest !== undefined) {
    const kind = longest.gapMs >= endedMs - sinceMs - 2 * OUTAGE_CLOCK_SLACK_MS ? "stalled" : "paused";
    return { kind, gap_ms: longest.gapMs, at: new Date(longest.atMs).toISOString() };
  }
  const beating = guards.find((g) => {
    const since = sinceLastStart(g.events);
    // Only a guard that notes its stalls says, by noting none, that it kept beating.
    const startedAt = since[0]?.kind === "started" && since[0].stallMs !== undefined ? since[0].atMs : undefined;
    const beatsNow = g.heartbeat !== undefined && g.heartbeat.atMs >= endedMs - OUTAGE_CLOCK_SLACK_MS;
    return startedAt !== undefined && startedAt <= sinceMs && !endedBefore(g, endedMs - OUTAGE_CLOCK_SLACK_MS) && beatsNow && !waitedDuring(g, sinceMs, endedMs);
  });
  return beating?.heartbeat === undefined ? undefined : { kind: "ran", beat_at: new Date(beating.heartbeat.atMs).toISOString() };
}
