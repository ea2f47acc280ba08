/**
 * `launcher top`'s screen: the picture (src/app/top.ts) as lines of at most a given width. Pure:
 * the same picture, width and time give the same lines. Every text that came from the daemon is
 * shown with its control characters escaped (./terminal.ts), so a name cannot move the cursor.
 */
import { plain, STATUS_STYLE, type Paint } from "../app/colour.js";
import type { StreamState, TopBoot, TopPicture } from "../app/top.js";
import type { ClusterNodeView, DeploymentView, LaneView } from "../contract/read-api.js";
import { KIB_PER_GIB } from "../contract/units.js";
import { escapeControls } from "./terminal.js";

type Style = Parameters<Paint>[0];
/** A piece of a line: plain text, or text in a style. */
type Seg = string | readonly [Style, string];
type Line = readonly Seg[];

export interface TopViewOptions {
  /** The daemon's URL, as the header names it. */
  readonly daemon: string;
  /** ms since the epoch: what "for 3m" and "in 2s" count from. */
  readonly now: number;
  /** Each line is cut to this many characters; undefined: lines are whole (a pipe, a file). */
  readonly width?: number;
  /** The stream's state; undefined: one frame, no stream (not a terminal, --once). */
  readonly stream?: StreamState;
  readonly paint?: Paint;
}

const ELLIPSIS = "…";
/** The widest a name column grows: a longer name is cut in its column rather than pushing the rest off screen. */
const MAX_NAME = 24;
/** How long an ended boot stays on screen after its end. */
export const ENDED_BOOT_SHOWN_MS = 10 * 60_000;

const textOf = (s: Seg): string => (typeof s === "string" ? s : s[1]);

/** Code points, so a cut never splits a surrogate pair (a wide character counts as one: an approximation). */
const chars = (s: string): string[] => [...s];

/** One line: its pieces escaped, cut to `width` with an ellipsis, then painted. */
export function fit(line: Line, width: number | undefined, paint: Paint = plain): string {
  const segs = line.map((s): readonly [Style | undefined, string] => (typeof s === "string" ? [undefined, escapeControls(s)] : [s[0], escapeControls(s[1])]));
  let room = width === undefined ? Number.POSITIVE_INFINITY : Math.max(1, width);
  const total = segs.reduce((n, [, t]) => n + chars(t).length, 0);
  const cut = total > room;
  if (cut) room -= 1;
  let out = "";
  for (const [style, text] of segs) {
    if (room <= 0) break;
    const part = chars(text).slice(0, room).join("");
    room -= chars(part).length;
    out += style === undefined ? part : paint(style, part);
  }
  return cut ? `${out}${ELLIPSIS}` : out;
}

/** A name in a column of `width`: padded, or cut with an ellipsis. */
const column = (name: string, width: number): string => {
  const c = chars(name);
  return c.length > width ? `${c.slice(0, width - 1).join("")}${ELLIPSIS}` : name.padEnd(width);
};

const columnWidth = (names: readonly string[]): number => Math.min(MAX_NAME, Math.max(1, ...names.map((n) => chars(n).length)));

/** 3s, 4m05s, 2h10m. */
export function span(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

const gib = (kib: number): string => (kib / KIB_PER_GIB).toFixed(1);

function header(o: TopViewOptions): Line {
  const s = o.stream;
  const at = new Date(o.now).toISOString().slice(11, 19);
  if (s === undefined) return [["bold", "launcher top"], `  ${o.daemon}  at ${at} UTC`];
  if (s.kind === "live") return [["bold", "launcher top"], `  ${o.daemon}  `, ["green", "live"], `  ${at} UTC  (q quits)`];
  // Rounded up: a countdown says 1s until it is over.
  const wait = Math.ceil(Math.max(0, s.retry_at_ms - o.now) / 1000) * 1000;
  return [["bold", "launcher top"], `  ${o.daemon}  `, ["yellow", `stream closed: ${s.why}; reconnecting in ${span(wait)} (attempt ${s.attempt})`], "  (q quits)"];
}

/** A node: reachable or not, its memory available of total, and its headroom over the guard's floor. */
function nodeLine(n: ClusterNodeView, width: number): Line {
  // A node out after running launcher's ranks says which kind, since when (the daemon's clock, UTC).
  const reach: Seg = n.reachable === undefined ? ["dim", "not polled yet"] : n.reachable ? ["green", "up"] : ["red", n.outage === undefined ? "unreachable" : `${n.outage.kind} since ${n.outage.since.slice(11, 19)}`];
  const m = n.memory;
  if (m === undefined) return ["  ", column(n.name, width), "  ", reach, "  ", ["dim", "memory not read yet (launcher doctor reads it)"]];
  const headroomGiB = m.available_kib / KIB_PER_GIB - m.floor_gib;
  const verdict: Seg = headroomGiB < 0 ? ["red", `${(-headroomGiB).toFixed(1)} GiB under the floor`] : ["dim", `${headroomGiB.toFixed(1)} GiB over the floor`];
  return ["  ", column(n.name, width), "  ", reach, `  memory ${gib(m.available_kib)} / ${gib(m.total_kib)} GiB available, floor ${m.floor_gib} GiB: `, verdict, ["dim", `  (${m.source}${m.deployment === undefined ? "" : ` of ${m.deployment}`})`]];
}

function nodeLines(p: TopPicture): Line[] {
  if (p.clusters.length === 0) return [[["bold", "NODES"]], ["  the daemon watches no cluster"]];
  return p.clusters.flatMap((c): Line[] => {
    const width = columnWidth(c.nodes.map((n) => n.name));
    return [[["bold", "NODES"], ` of ${c.name}`], ...(c.nodes.length === 0 ? [["  no nodes"]] : c.nodes.map((n) => nodeLine(n, width)))];
  });
}

const deploymentKey = (d: { cluster: string; deployment: string }): string => `${d.cluster}/${d.deployment}`;

/** A lane and what serves it (with that deployment's status, when discovery sees it). */
function laneLine(l: LaneView, p: TopPicture, width: number): Line {
  const serving = l.deployment === undefined ? undefined : p.deployments.get(`${l.cluster}/${l.deployment}`);
  const state: Seg = [l.state === "serving" ? "green" : l.state === "switching" ? "yellow" : "dim", l.state];
  const what = l.state === "switching" ? ` to ${l.switching_to ?? "?"}${l.deployment === undefined ? "" : ` (from ${l.deployment})`}` : l.deployment === undefined ? "" : ` ${l.deployment}`;
  const detail = l.recipe === undefined ? "" : `  recipe ${l.recipe}${l.served_model === undefined ? "" : `, model ${l.served_model}`}`;
  const status: Seg[] = serving === undefined ? [] : ["  ", [STATUS_STYLE[serving.status], serving.status]];
  return ["  ", column(l.name, width), "  ", state, what, ...status, detail, ["dim", `  since ${l.since.slice(0, 19).replace("T", " ")}`]];
}

function laneLines(p: TopPicture): Line[] {
  const lanes = [...p.lanes.values()].sort((a, b) => a.name.localeCompare(b.name));
  if (lanes.length === 0) return [[["bold", "LANES"]], [["dim", "  no lanes"]]];
  const width = columnWidth(lanes.map((l) => l.name));
  return [[["bold", "LANES"]], ...lanes.map((l) => laneLine(l, p, width))];
}

/** tok/s of the newest metrics point, when the engine reported it. */
function tokens(p: TopPicture, d: DeploymentView): string {
  const tps = p.metrics.get(deploymentKey(d))?.generation_tps;
  return tps === undefined ? "" : `  ${tps.toFixed(1)} tok/s`;
}

function deploymentLine(d: DeploymentView, p: TopPicture, width: number, multi: boolean): Line {
  const phase = d.status === "serving" && d.phase === "serving" ? "" : ` (${d.phase})`;
  const nodes = [...new Set(d.ranks.map((r) => r.node))];
  return [
    "  ",
    column(d.deployment, width),
    "  ",
    [STATUS_STYLE[d.status], d.status],
    phase,
    tokens(p, d),
    d.lane === undefined ? "" : `  lane ${d.lane}`,
    multi ? `  cluster ${d.cluster}` : "",
    `  on ${nodes.length === 0 ? "-" : nodes.join(",")}`,
    d.supervision === undefined ? "" : `  supervised: ${d.supervision}`,
    d.restarts === undefined ? "" : `  restarts ${d.restarts}`,
    d.missing.length === 0 ? "" : `  missing: ${d.missing.join("; ")}`,
  ];
}

function deploymentLines(p: TopPicture): Line[] {
  const ds = [...p.deployments.values()].sort((a, b) => deploymentKey(a).localeCompare(deploymentKey(b)));
  if (ds.length === 0) return [[["bold", "DEPLOYMENTS"]], [["dim", "  no deployments"]]];
  const width = columnWidth(ds.map((d) => d.deployment));
  const multi = new Set(ds.map((d) => d.cluster)).size > 1;
  return [[["bold", "DEPLOYMENTS"]], ...ds.map((d) => deploymentLine(d, p, width, multi))];
}

/** A boot in progress with each node's phase; an ended one in a line, for a while after its end. */
function bootLines(b: TopBoot, now: number): Line[] {
  const where = `  cluster ${b.cluster}${b.lane === undefined ? "" : `  lane ${b.lane}`}`;
  if (b.state === "booting") {
    const nodes = Object.entries(b.nodes);
    const width = columnWidth(nodes.map(([n]) => n));
    return [
      ["  ", b.deployment, "  ", ["yellow", "booting"], ` for ${span(now - b.started_ms)}`, where],
      ...(nodes.length === 0 ? [[["dim", "    no node started yet"]] as Line] : nodes.map(([n, phase]): Line => ["    ", column(n, width), "  ", phase])),
    ];
  }
  const ago = b.ended_ms === undefined ? "" : ` ${span(now - b.ended_ms)} ago`;
  const took = b.ended_ms === undefined ? "" : ` in ${span(b.ended_ms - b.started_ms)}`;
  if (b.state === "ready") return [["  ", b.deployment, "  ", ["green", "ready"], took, ago, where]];
  return [["  ", b.deployment, "  ", ["red", "failed"], ago, where, `: ${(b.error ?? "").split("\n")[0] ?? ""}`]];
}

function bootSection(p: TopPicture, now: number): Line[] {
  const shown = [...p.boots.values()]
    .filter((b) => b.state === "booting" || (b.ended_ms !== undefined && now - b.ended_ms <= ENDED_BOOT_SHOWN_MS))
    .sort((a, b) => b.started_ms - a.started_ms);
  if (shown.length === 0) return [[["bold", "BOOTS"]], [["dim", "  no boot in progress"]]];
  return [[["bold", "BOOTS"]], ...shown.flatMap((b) => bootLines(b, now))];
}

/** The screen: a header, then nodes, lanes, deployments and boots, each line at most `width`. */
export function renderTop(p: TopPicture, o: TopViewOptions): string[] {
  const lines: Line[] = [header(o), ...nodeLines(p), ...laneLines(p), ...deploymentLines(p), ...bootSection(p, o.now)];
  return lines.map((l) => fit(l, o.width, o.paint));
}
