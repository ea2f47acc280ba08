import type { ClusterNode } from "../cluster/cluster.js";
import { RemoteError, UserError } from "../config/errors.js";
import { RESUMED_PARTIAL } from "../plan/pull-space.js";
import { hfHomeOfHub } from "../plan/pull.js";
import { blobSha256, parseInspection, revisionProblem, snapshotTotals, wantedFiles, weightsLocation, type SnapshotFile } from "../plan/weights.js";
import type { Recipe } from "../recipe/recipe.js";
import type { Docker } from "../remote/docker.js";
import { execChecked, outputTail, unreachable } from "../remote/transport.js";
import { handled, joinPipe } from "./images.js";
import { inPool } from "../config/pool.js";
import type { TransferProgress } from "../nodes/progress.js";
import { runChain } from "./chain.js";
import { definedEnd, endWhy } from "./hop.js";
import { checkSpace, clusterRoutes, parseProbe, planRoutes, PROBE_SCRIPT, type NodeProbe, type NodeRoute, type RoutePlan, type TransferPath } from "./route.js";
import { cacheArgv, CACHE_PERL, UNSAFE_EXIT } from "./hf-cache.js";
import { together } from "./together.js";
import type { ClusterSession } from "../nodes/session.js";

export interface NodeWeights {
  readonly node: string;
  /** The repo folder looked in on that node. */
  readonly path: string;
  readonly present: boolean;
  readonly revision?: string;
  readonly files?: number;
  /** The snapshot's size on disk, links followed (the fit check divides it between the ranks). */
  readonly bytes?: number;
  /** Why not present: no repo folder, no ref, no snapshot, or links to blobs that are not there. */
  readonly reason?: string;
}

// The suffix of a blob sync is writing, one home with the download's (pull-space.ts: the free-space
// arithmetic reads both). A constant, not a value: it is written into the scripts' text.
const PARTIAL = RESUMED_PARTIAL.sync;

// $1 CACHE_PERL, $2 the cache's root, $3 the file under it, $4 the expected size, $5 its sha256:
// checks the partial copy's path as every write is checked (hf-cache.ts), then its size and
// digest, and moves it into place (rename(2) replaces a link there, never follows it).
// The digest comes from openssl where the node has it and it agrees: Debian's and Ubuntu's
// sha256sum is built without OpenSSL (here, on an idle machine: 0.68 s of CPU for 300 MiB, against
// 0.23 s for openssl dgst, which uses the CPU's SHA instructions), and every node checks every blob
// it took, 3 at once on a 4-node cluster, hundreds of GB for the seeds' models. Only a match is
// taken from openssl: any other answer (no openssl, another output format, an error) is decided by
// coreutils, so a file is never removed on openssl's word alone. The file goes in on stdin: no
// path on either command line.
const FINISH_SCRIPT = `perl -e "$1" -- check "$2" "$3" "$3${PARTIAL}" || exit ${UNSAFE_EXIT}
f="$2/$3"; p="$2/$3${PARTIAL}"
s=$(stat -c %s "$p") || exit 4
[ "$s" -eq "$4" ] || { echo "size $s, expected $4"; exit 5; }
h=$(openssl dgst -sha256 -r < "$p" 2>/dev/null) && h=\${h%% *}
[ "$h" = "$5" ] || h=$(sha256sum < "$p" | cut -d' ' -f1)
[ "$h" = "$5" ] || { rm -f "$p"; echo "sha256 $h, expected $5"; exit 6; }
mv -f "$p" "$f"`;

/** The argv that checks the partial copy of ROOT/REL (its path, size and SHA-256) and moves it into place (FINISH_SCRIPT). */
export const finishFile = (root: string, rel: string, size: number, sha256: string): string[] => ["sh", "-c", FINISH_SCRIPT, "sh", CACHE_PERL, root, rel, String(size), sha256];

/** Where a node keeps the recipe's model: the cache's root (trusted), the repo under it, and the pinned revision ("" for refs/main). */
interface Located {
  readonly root: string;
  /** hub/models--ORG--NAME, under root. */
  readonly repo: string;
  /** root/repo, as messages name it. */
  readonly path: string;
  readonly pin: string;
  /** The snapshot's files the engine reads (WeightsLocation.files); undefined: all of them. */
  readonly files?: readonly string[];
}

function located(recipe: Recipe, node: ClusterNode): Located {
  const loc = weightsLocation(recipe, node);
  if (loc === undefined) throw new UserError(`node ${node.name}: the HF cache path uses ~ but the node's user is unknown`, `set user (or home) for ${node.name} in the cluster file`);
  const pin = loc.revision ?? "";
  const problem = pin === "" ? undefined : revisionProblem(pin);
  if (problem !== undefined) throw new UserError(`${recipe.file}: the revision in args, ${JSON.stringify(pin)}: ${problem}`, "pin a 40-hex commit or a branch or tag name such as main");
  const root = hfHomeOfHub(loc.hub);
  return { root, repo: `hub/${loc.repo}`, path: `${loc.hub}/${loc.repo}`, pin, ...(loc.files === undefined ? {} : { files: loc.files }) };
}

const CACHE_HINT = "something other than huggingface_hub changed this cache (a container that mounts it read-write?): remove the repo folder there and run the sync again";

/** One CACHE_PERL operation on a node: its stdout; a refusal names the node and what was refused. */
async function cacheOp(docker: Docker, argv: readonly string[], what: string, options: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<string> {
  const r = await docker.transport.exec(argv, { timeoutMs: options.timeoutMs ?? 120_000, ...(options.signal === undefined ? {} : { signal: options.signal }) });
  if (r.code === UNSAFE_EXIT) throw new RemoteError(docker.node, `${what}: refused, the cache there is not as huggingface_hub leaves it`, r.stderr.trim().split("\n").slice(-4).join("\n"), CACHE_HINT);
  if (r.code !== 0) throw unreachable(docker.transport, r) ?? new RemoteError(docker.node, `${what} failed (exit ${r.code})`, outputTail(r));
  return r.stdout;
}

/** A node's view of the repo: the report, and (when present) the snapshot's files and the ref that named it. */
interface Inspected {
  readonly weights: NodeWeights;
  readonly loc: Located;
  readonly files: readonly SnapshotFile[];
  readonly ref?: { readonly name: string; readonly commit: string };
}

async function inspectNode(recipe: Recipe, docker: Docker, node: ClusterNode, signal?: AbortSignal): Promise<Inspected> {
  const loc = located(recipe, node);
  const out = await cacheOp(docker, cacheArgv("inspect", loc.root, loc.repo, loc.pin), `checking the weights in ${loc.path}`, { timeoutMs: 60_000, ...(signal === undefined ? {} : { signal }) });
  const seen = parseInspection(node.name, loc.path, loc.pin, out);
  const base = { node: node.name, path: loc.path };
  if (seen.kind === "missing") return { weights: { ...base, present: false, reason: seen.reason }, loc, files: [] };
  // Only the files the engine reads count, and only they are sent (a GGUF repo holds many quantisations).
  const { files, missing } = wantedFiles(seen.files, loc.files);
  const totals = snapshotTotals(files);
  const weights: NodeWeights =
    missing.length > 0
      ? { ...base, present: false, reason: `snapshot ${seen.revision} lacks ${missing.length} of the recipe's ${loc.files?.length ?? 0} files (${missing.slice(0, 3).join(", ")}${missing.length > 3 ? ", ..." : ""})` }
      : totals.broken > 0
        ? { ...base, present: false, reason: `${totals.broken} files of snapshot ${seen.revision} point to absent blobs` }
        : { ...base, present: true, revision: seen.revision, files: totals.files, bytes: totals.bytes };
  return { weights, loc, files, ...(seen.ref === undefined ? {} : { ref: seen.ref }) };
}

const inspectAll = (recipe: Recipe, session: ClusterSession, nodes: readonly ClusterNode[], signal?: AbortSignal): Promise<Inspected[]> =>
  Promise.all(nodes.map((node) => inspectNode(recipe, session.docker.get(node.name) as Docker, node, signal)));

/** `signal` ends the checks still running (a cache on a hung network filesystem must not hold up a Ctrl-C). */
export async function weightsReport(recipe: Recipe, session: ClusterSession, nodes: readonly ClusterNode[], signal?: AbortSignal): Promise<NodeWeights[]> {
  return (await inspectAll(recipe, session, nodes, signal)).map((i) => i.weights);
}

export interface SyncResult {
  readonly source: string;
  readonly revision: string;
  readonly nodes: readonly SyncedNode[];
}

export interface SyncedNode {
  readonly node: string;
  readonly action: "had" | "copied";
  readonly bytes: number;
  readonly resumed_bytes: number;
  readonly blobs: number;
  /** How the bytes came: from another node over the fabric or management network, or through this machine. */
  readonly path?: TransferPath;
  readonly from?: string;
  /** Why they went through this machine. */
  readonly why?: string;
}

export interface SyncOptions {
  /** Set: every byte through this machine, for this reason (--relay). */
  readonly relay?: string;
  /** Set: only these nodes get the files (the others may still be the source): those that read them (weightReaders). */
  readonly only?: ReadonlySet<string>;
}

const ok = (docker: Docker, argv: readonly string[], what: string): Promise<string> => execChecked(docker.transport, argv, what, 120_000);

/** Where a file of the snapshot is on one node: the cache's root and the path under it. */
interface Place {
  readonly root: string;
  readonly rel: string;
}
const placeArgs = (p: Place): [string, string] => [p.root, p.rel];

/** Streams one file's bytes from `offset` on: the source's `read` into the target's partial file (`append`), through this machine. */
async function copyFrom(source: Docker, target: Docker, from: Place, to: Place, offset: number, signal: AbortSignal, onBytes: (n: number) => void): Promise<void> {
  const read = source.transport.spawn(cacheArgv("read", from.root, from.rel, String(offset)));
  read.stdin.end();
  const write = target.transport.spawn(cacheArgv("append", to.root, to.rel));
  write.stdout.resume();
  const abort = (): void => {
    read.kill();
    write.kill();
  };
  signal.addEventListener("abort", abort, { once: true });
  read.stdout.on("data", (c: Buffer) => onBytes(c.length));
  joinPipe(read, write);
  try {
    const [r, w] = await Promise.all([read.done, write.done]);
    if (signal.aborted) throw interrupted();
    // What the node's end status says (ssh's lost connection, a full disk), where it says anything.
    const failed = (node: string, what: string, p: Place, e: { code: number; stderr: string }): RemoteError =>
      new RemoteError(node, definedEnd(e.code) ? `${what}: ${endWhy(e.code, e.stderr, `${node}:${p.root}/${p.rel}`)}` : `${what} ${p.root}/${p.rel} failed (exit ${e.code})`, e.stderr, e.code === UNSAFE_EXIT ? CACHE_HINT : undefined);
    if (r.code !== 0) throw failed(source.node, "reading", from, r);
    if (w.code !== 0) throw failed(target.node, "writing", to, w);
  } finally {
    signal.removeEventListener("abort", abort);
  }
}

/** How many files of a snapshot move at the same time. */
const FILES_AT_ONCE = 4;

const interrupted = (): UserError => new UserError("interrupted: the partial copy stays and a new `launcher models sync` resumes it");

/** One file of the snapshot to bring to the nodes that lack it: a blob, or a plain file of the snapshot folder. */
interface FileJob {
  readonly label: string;
  /** Its path in the repo folder (blobs/NAME, snapshots/REV/PATH), the same on every node. */
  readonly rel: string;
  readonly size: number;
  /** Its SHA-256: the blob's name for an LFS file, else what the source computed. */
  readonly sha256: string;
  /** Bytes each node that needs it already holds (its partial file). */
  readonly offsets: ReadonlyMap<string, number>;
  readonly blob: boolean;
}

/**
 * The SHA-256 of each file whose name is not one (git-stored blobs, named by their git SHA-1, and
 * plain files), computed on the source, so that every node checks every file it took.
 */
async function sourceDigests(source: Docker, loc: Located, rels: readonly string[]): Promise<Map<string, string>> {
  if (rels.length === 0) return new Map();
  const out = (await cacheOp(source, cacheArgv("hash", loc.root, ...rels.map((r) => `${loc.repo}/${r}`)), "hashing the small files of the snapshot")).split("\n").filter(Boolean);
  if (out.length !== rels.length || !out.every((h) => /^[0-9a-f]{64}$/.test(h))) throw new RemoteError(source.node, "hashing the small files of the snapshot gave no digest for each", out.slice(0, 4).join("\n"));
  return new Map(rels.map((r, i) => [r, out[i] as string]));
}

/**
 * On one target, before any byte comes: the repo's folders (and those the snapshot's plain files
 * go in), no stale partial plain file, and how much of each blob it holds. Every path is checked
 * on the node (CACHE_PERL): a link planted in its cache refuses the node here.
 */
async function prepareTarget(docker: Docker, loc: Located, revision: string, files: readonly SnapshotFile[], blobs: ReadonlyMap<string, { size: number }>): Promise<Map<string, number>> {
  const snap = `${loc.repo}/snapshots/${revision}`;
  const plain = files.filter((f) => f.blob === undefined);
  const dirs = new Set([`${loc.repo}/blobs`, `${loc.repo}/refs`, snap, ...plain.flatMap((f) => (f.path.includes("/") ? [`${snap}/${f.path.slice(0, f.path.lastIndexOf("/"))}`] : []))]);
  await cacheOp(docker, cacheArgv("prepare", loc.root, ...dirs, "--", ...plain.map((f) => `${snap}/${f.path}${PARTIAL}`)), `making the cache folders in ${loc.path}`);
  const state = (await cacheOp(docker, cacheArgv("state", loc.root, `${loc.repo}/blobs`, PARTIAL, ...blobs.keys()), "reading the blobs there")).split("\n").filter(Boolean).map((l) => l.split(" "));
  const offsets = new Map<string, number>();
  for (const [name, complete, partial] of state) {
    const blob = blobs.get(name as string);
    if (blob === undefined || Number(complete) === blob.size) continue;
    const have = Number(partial);
    if (have > blob.size) await cacheOp(docker, cacheArgv("prepare", loc.root, "--", `${loc.repo}/blobs/${name}${PARTIAL}`), "removing an oversized partial blob");
    offsets.set(name as string, have > 0 && have <= blob.size ? have : 0);
  }
  return offsets;
}

/** The node the snapshot comes from, what it holds (its revision, blobs) and the nodes that lack it. */
interface SyncSource {
  readonly had: Inspected;
  readonly revision: string;
  /** snapshots/REVISION, under the repo. */
  readonly snap: string;
  readonly blobs: ReadonlyMap<string, { size: number }>;
  readonly targets: readonly Inspected[];
}

function syncSource(recipe: Recipe, inspected: readonly Inspected[], wanted: (node: string) => boolean): SyncSource {
  const had = inspected.find((i) => i.weights.present);
  if (had === undefined) {
    throw new UserError(`model ${recipe.model} is on no node:\n${inspected.map(({ weights: r }) => `  - ${r.node}: ${r.reason ?? "?"} (${r.path})`).join("\n")}`, "download it on one node first (huggingface-cli download), then sync");
  }
  const revision = had.weights.revision as string;
  const blobs = new Map<string, { size: number }>();
  for (const f of had.files) if (f.blob !== undefined) blobs.set(f.blob, { size: f.size });
  return { had, revision, snap: `snapshots/${revision}`, blobs, targets: inspected.filter((i) => !i.weights.present && wanted(i.weights.node)) };
}

/**
 * Each file to send with what each target already holds of it: the SHA-256 of those not named by
 * one asked of the source while every target is prepared (prepareTarget).
 */
async function fileJobs(src: SyncSource, source: Docker, docker: (node: string) => Docker): Promise<FileJob[]> {
  const { had, snap, blobs, targets } = src;
  const plain = had.files.filter((f) => f.blob === undefined);
  const unnamed = targets.length === 0 ? [] : [...[...blobs.keys()].filter((b) => blobSha256(b) === undefined).map((b) => `blobs/${b}`), ...plain.map((f) => `${snap}/${f.path}`)];
  const [digests, states] = await Promise.all([
    sourceDigests(source, had.loc, unnamed),
    Promise.all(targets.map(async (t) => ({ node: t.weights.node, offsets: await prepareTarget(docker(t.weights.node), t.loc, src.revision, had.files, blobs) }))),
  ]);
  return [
    ...[...blobs].map(([name, b]): FileJob => ({
      label: name.slice(0, 16),
      rel: `blobs/${name}`,
      size: b.size,
      sha256: blobSha256(name) ?? (digests.get(`blobs/${name}`) as string),
      offsets: new Map(states.flatMap((s) => (s.offsets.has(name) ? [[s.node, s.offsets.get(name) as number] as const] : []))),
      blob: true,
    })),
    ...plain.map((f): FileJob => ({
      label: f.path,
      rel: `${snap}/${f.path}`,
      size: f.size,
      sha256: digests.get(`${snap}/${f.path}`) as string,
      offsets: new Map(targets.map((t) => [t.weights.node, 0])),
      blob: false,
    })),
  ];
}

/** What one target was sent, for the result. */
interface Sent {
  bytes: number;
  resumed: number;
  blobs: number;
  from?: string;
  path?: TransferPath;
}

/** One sync under way: where the bytes come from and go, how each target is served, what each was sent so far. */
interface SyncRun {
  readonly source: Docker;
  readonly sourceLoc: Located;
  readonly docker: (node: string) => Docker;
  readonly locOf: ReadonlyMap<string, Located>;
  readonly routes: ReadonlyMap<string, NodeRoute>;
  readonly plan: RoutePlan;
  /** Targets served through this machine, and why. */
  readonly relayWhy: Map<string, string>;
  readonly relay: string | undefined;
  readonly totals: ReadonlyMap<string, Sent>;
  /** Bytes of the files still on their way, per node: the progress line is what is done plus these. */
  readonly moving: ReadonlyMap<string, Map<FileJob, number>>;
  readonly progress: TransferProgress;
}

/** A target goes through this machine: said once (files go several at once: the first to find a node unreachable says why). */
function sayRelay(run: SyncRun, node: string, why: string): void {
  if (run.relayWhy.has(node)) return;
  run.relayWhy.set(node, why);
  if (run.relay === undefined) run.progress.note?.(`  ${node.padEnd(10)} through this machine: ${why}`);
}

const fromPlace = (run: SyncRun, job: FileJob): Place => ({ root: run.sourceLoc.root, rel: `${run.sourceLoc.repo}/${job.rel}` });
function toPlace(run: SyncRun, node: string, job: FileJob, suffix = ""): Place {
  const loc = run.locOf.get(node) as Located;
  return { root: loc.root, rel: `${loc.repo}/${job.rel}${suffix}` };
}

function showFile(run: SyncRun, job: FileJob, node: string, bytes: number, detail: string): void {
  const m = run.moving.get(node) as Map<FileJob, number>;
  m.set(job, bytes);
  run.progress.node(node, (run.totals.get(node)?.bytes ?? 0) + [...m.values()].reduce((a, b) => a + b, 0), false, `${job.label}  ${detail}`);
}

function landed(run: SyncRun, node: string, job: FileJob, bytes: number): void {
  (run.totals.get(node) as Sent).bytes += bytes;
  run.moving.get(node)?.delete(job);
}

/** One file to one node through this machine, from what it holds of it on. */
async function relayFile(run: SyncRun, job: FileJob, node: string, branch: AbortSignal): Promise<void> {
  let n = 0;
  await copyFrom(run.source, run.docker(node), fromPlace(run, job), toPlace(run, node, job, PARTIAL), job.offsets.get(node) ?? 0, branch, (c) => {
    n += c;
    showFile(run, job, node, n, "through this machine");
  });
  landed(run, node, job, n);
  (run.totals.get(node) as Sent).path = "relay";
}

/** One file node to node through the `direct` targets (from the least any of them holds), then the relay to those the chain could not reach. */
async function chainFile(run: SyncRun, job: FileJob, direct: readonly NodeRoute[], branch: AbortSignal): Promise<void> {
  if (direct.length === 0) return;
  const from = Math.min(...direct.map((r) => job.offsets.get(r.node) ?? 0));
  const ahead = (node: string): number => (job.offsets.get(node) ?? 0) - from;
  const partial = (node: string): [string, string] => placeArgs(toPlace(run, node, job, PARTIAL));
  const out = await runChain(
    { node: run.source.node, transport: run.source.transport, command: cacheArgv("read", run.sourceLoc.root, fromPlace(run, job).rel, String(from)) },
    direct.map((r) => ({ ...r, transport: run.docker(r.node).transport, sink: cacheArgv("append", ...partial(r.node)), dest: partial(r.node).join("/"), skip: ahead(r.node) })),
    (node, bytes) => showFile(run, job, node, Math.max(0, bytes - ahead(node)), `over ${run.routes.get(node)?.path ?? "?"}`),
    { signal: branch },
  );
  if (branch.aborted) throw interrupted();
  if (out.failed.length > 0) throw new RemoteError(out.failed.map((f) => f.node).join(", "), `sending ${job.label} node to node failed`, out.failed.map((f) => `${f.node}: ${f.why}`).join("\n"), "run the sync again: it resumes; --relay sends through this machine instead");
  for (const d of out.delivered) {
    landed(run, d.node, job, d.bytes - ahead(d.node));
    const t = run.totals.get(d.node) as Sent;
    t.from = d.from;
    t.path = d.path;
  }
  for (const u of out.unreached) sayRelay(run, u.node, u.why);
  await together(branch, out.unreached.map((u) => (b: AbortSignal) => relayFile(run, job, u.node, b)));
}

/** One file to every node that lacks it (the chain and the relay at once), then checked into place on each. */
async function sendFile(run: SyncRun, job: FileJob, signal: AbortSignal): Promise<void> {
  if (signal.aborted) throw interrupted();
  const needing = [...job.offsets.keys()];
  if (needing.length === 0) return;
  for (const n of needing) (run.totals.get(n) as Sent).resumed += job.offsets.get(n) ?? 0;
  const direct = run.plan.direct.filter((r) => needing.includes(r.node) && !run.relayWhy.has(r.node));
  const relayed = needing.filter((n) => run.relayWhy.has(n) && !direct.some((r) => r.node === n));
  await together(signal, [(b: AbortSignal) => chainFile(run, job, direct, b), ...relayed.map((n) => (b: AbortSignal) => relayFile(run, job, n, b))]);
  await Promise.all(
    needing.map(async (n) => {
      const at = toPlace(run, n, job);
      await cacheOp(run.docker(n), finishFile(at.root, at.rel, job.size, job.sha256), `checking ${job.label}`);
      if (job.blob) (run.totals.get(n) as Sent).blobs++;
    }),
  );
}

/** Each target's snapshot folder linked and its ref written, once every file is in place. */
async function linkSnapshots(run: SyncRun, src: SyncSource): Promise<void> {
  // Links exactly as parseInspection accepted them: each into blobs/ of this repo.
  const links = src.had.files.flatMap((x) => (x.link === undefined ? [] : [x.path, x.link]));
  const ref = src.had.ref;
  await Promise.all(
    src.targets.map(async (t) => {
      const target = run.docker(t.weights.node);
      await cacheOp(target, cacheArgv("link", t.loc.root, `${t.loc.repo}/${src.snap}`, ...links), "linking the snapshot");
      if (ref !== undefined) await cacheOp(target, cacheArgv("ref", t.loc.root, `${t.loc.repo}/refs/${ref.name}`, ref.commit), `writing refs/${ref.name}`);
      run.progress.node(t.weights.node, run.totals.get(t.weights.node)?.bytes ?? 0, true);
    }),
  );
}

function syncedNode(run: SyncRun, r: NodeWeights): SyncedNode {
  const t = run.totals.get(r.node);
  if (r.present || t === undefined) return { node: r.node, action: "had", bytes: 0, resumed_bytes: 0, blobs: 0 };
  const why = run.relayWhy.get(r.node);
  return {
    node: r.node,
    action: "copied",
    bytes: t.bytes,
    resumed_bytes: t.resumed,
    blobs: t.blobs,
    ...(t.path === undefined ? {} : { path: t.path }),
    ...(t.from === undefined || t.path === "relay" ? {} : { from: t.from }),
    ...(why === undefined || t.path !== "relay" ? {} : { why }),
  };
}

/**
 * Copies the snapshot (only the files of that revision and the blobs they point to) from a node
 * that has it to every node that lacks it. Node to node by default: for each file, a chain from
 * the source through every node that needs it (runChain), each writing what it lacks while it
 * passes every byte on; a node the chain cannot serve gets the relay through this machine, and
 * why is said (options.relay: all of them). A file is written to NAME.launcher-partial and moved
 * into place once its size and SHA-256 check out, so an interrupted sync resumes from the bytes
 * already there, whichever way they came. Every node's cache is untrusted (recipes mount it into
 * containers): names, links and revisions from the source are checked (parseInspection) before
 * they become paths, and every read and write goes through CACHE_PERL, which follows no link.
 */
export async function syncWeights(recipe: Recipe, session: ClusterSession, nodes: readonly ClusterNode[], progress: TransferProgress, signal: AbortSignal, options: SyncOptions = {}): Promise<SyncResult> {
  const inspected = await inspectAll(recipe, session, nodes);
  const wanted = (node: string): boolean => options.only === undefined || options.only.has(node);
  const src = syncSource(recipe, inspected, wanted);
  const docker = (node: string): Docker => session.docker.get(node) as Docker;
  const source = docker(src.had.weights.node);
  const { targets } = src;
  // Before any byte moves: every target has room for what it lacks, and the hop's tools. Asked
  // while the folders are made and the blobs read (one round trip fewer before the bytes).
  const probe = (node: string, path: string): Promise<NodeProbe> => ok(docker(node), ["sh", "-c", PROBE_SCRIPT, "sh", "path", path], "checking the node before the sync").then((out) => parseProbe(node, out));
  const probing = handled(Promise.all([
    options.relay === undefined && targets.length > 0 ? probe(source.node, src.had.loc.path) : Promise.resolve(undefined),
    Promise.all(targets.map((t) => probe(t.weights.node, t.loc.path))),
  ]));
  const jobs = await fileJobs(src, source, docker);
  const [sourceProbe, probes] = await probing;
  const targetNodes = targets.map((t) => t.weights.node);
  const need = new Map(targetNodes.map((n) => [n, jobs.reduce((sum, j) => sum + (j.offsets.has(n) ? j.size - (j.offsets.get(n) ?? 0) : 0), 0)]));
  checkSpace(probes, need, `model ${recipe.model}`);
  const routes = clusterRoutes(session.cluster.nodes);
  const plan = planRoutes(source.node, sourceProbe, probes, routes, options.relay);
  const run: SyncRun = {
    source,
    sourceLoc: src.had.loc,
    docker,
    locOf: new Map(targets.map((t) => [t.weights.node, t.loc])),
    routes,
    plan,
    relayWhy: new Map(),
    relay: options.relay,
    totals: new Map(targetNodes.map((n) => [n, { bytes: 0, resumed: 0, blobs: 0 }])),
    moving: new Map(targetNodes.map((n) => [n, new Map()])),
    progress,
  };
  for (const r of plan.relay) sayRelay(run, r.node, r.why);
  // Several files at once: a file's own costs (starting its hops, linking the chain, checking the
  // file at the end: round trips, not bytes) overlap another's bytes, and small files (config,
  // tokenizer) no longer wait one after another. An interrupt stops each file's own transfer
  // (runChain, copyFrom) and is thrown once they all ended, as the first failure.
  await inPool(jobs, FILES_AT_ONCE, undefined, (job) => sendFile(run, job, signal));
  await linkSnapshots(run, src);
  const after = await weightsReport(recipe, session, nodes.filter((n) => wanted(n.name)));
  const still = after.filter((a) => !a.present);
  if (still.length > 0) throw new RemoteError(still.map((s) => s.node).join(", "), "after the sync the snapshot is still incomplete", still.map((s) => `${s.node}: ${s.reason ?? "?"}`).join("\n"));
  return { source: src.had.weights.node, revision: src.revision, nodes: inspected.filter((i) => i.weights.present || wanted(i.weights.node)).map((i) => syncedNode(run, i.weights)) };
}
