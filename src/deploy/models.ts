import type { ClusterNode } from "../cluster/cluster.js";
import { RemoteError, UserError } from "../config/errors.js";
import { RESUMED_PARTIAL } from "../plan/pull-space.js";
import { blobSha256, parseSnapshotListing, weightsLocation, type SnapshotFile } from "../plan/weights.js";
import type { Recipe } from "../recipe/recipe.js";
import type { DockerClient } from "../remote/docker.js";
import { execChecked } from "../remote/transport.js";
import { handled, joinPipe } from "./images.js";
import { inPool } from "./pool.js";
import type { TransferProgress } from "./progress.js";
import { runChain } from "../transfer/chain.js";
import { checkSpace, clusterRoutes, parseProbe, planRoutes, PROBE_SCRIPT, type NodeProbe, type TransferPath } from "../transfer/route.js";
import { together } from "../transfer/together.js";
import type { ClusterSession } from "./session.js";

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

// $1 the repo folder, $2 the pinned revision ("" for refs/main).
const CHECK_SCRIPT = `d="$1"; rev="$2"
[ -d "$d" ] || { echo "missing no folder"; exit 0; }
if [ -z "$rev" ]; then rev=$(cat "$d/refs/main" 2>/dev/null); [ -n "$rev" ] || { echo "missing no refs/main"; exit 0; }
elif [ -f "$d/refs/$rev" ]; then rev=$(cat "$d/refs/$rev"); fi
[ -d "$d/snapshots/$rev" ] || { echo "missing no snapshot $rev"; exit 0; }
broken=$(find -L "$d/snapshots/$rev" -type l | wc -l)
files=$(find -L "$d/snapshots/$rev" -type f | wc -l)
[ "$broken" -eq 0 ] || { echo "missing $broken files of snapshot $rev point to absent blobs"; exit 0; }
bytes=$(du -sLb "$d/snapshots/$rev" 2>/dev/null | cut -f1)
echo "ok $rev $files $bytes"`;

// $1 the snapshot folder: every file as `L SIZE LINK PATH` or `F SIZE - PATH`.
const LIST_SCRIPT = `cd "$1" || exit 3
find . \\( -type l -o -type f \\) | while IFS= read -r f; do
  if [ -L "$f" ]; then echo "L $(stat -L -c %s "$f") $(readlink "$f") $f"; else echo "F $(stat -c %s "$f") - $f"; fi
done`;

// The suffix of a blob sync is writing, one home with the download's (pull-space.ts: the free-space
// arithmetic reads both). A constant, not a value: it is written into the scripts' text.
const PARTIAL = RESUMED_PARTIAL.sync;

// $1 the blobs folder, then blob names: `NAME COMPLETE_SIZE PARTIAL_SIZE` (-1: absent).
const BLOB_STATE_SCRIPT = `b="$1"; shift
for n in "$@"; do
  c=$(stat -c %s "$b/$n" 2>/dev/null || echo -1); p=$(stat -c %s "$b/$n${PARTIAL}" 2>/dev/null || echo -1)
  echo "$n $c $p"
done`;

// $1 the file, $2 the expected size, $3 the sha256 or "": moves FILE + PARTIAL into place.
// The digest comes from openssl where the node has it and it agrees: Debian's and Ubuntu's
// sha256sum is built without OpenSSL (here, on an idle machine: 0.68 s of CPU for 300 MiB, against
// 0.23 s for openssl dgst, which uses the CPU's SHA instructions), and every node checks every blob
// it took, 3 at once on a 4-node cluster, hundreds of GB for the seeds' models. Only a match is
// taken from openssl: any other answer (no openssl, another output format, an error) is decided by
// coreutils, so a file is never removed on openssl's word alone. The file goes in on stdin: no
// path on either command line.
const FINISH_SCRIPT = `f="$1"; p="$1${PARTIAL}"
s=$(stat -c %s "$p") || exit 4
[ "$s" -eq "$2" ] || { echo "size $s, expected $2"; exit 5; }
if [ -n "$3" ]; then
  h=$(openssl dgst -sha256 -r < "$p" 2>/dev/null) && h=\${h%% *}
  [ "$h" = "$3" ] || h=$(sha256sum < "$p" | cut -d' ' -f1)
  [ "$h" = "$3" ] || { rm -f "$p"; echo "sha256 $h, expected $3"; exit 6; }
fi
mv -f "$p" "$f"`;

/** The argv that checks a file's partial copy (its size, its SHA-256 when known) and moves it into place (FINISH_SCRIPT). */
export const finishFile = (file: string, size: number, sha256?: string): string[] => ["sh", "-c", FINISH_SCRIPT, "sh", file, String(size), sha256 ?? ""];

// $1 the snapshot folder, then PATH LINK pairs.
const LINK_SCRIPT = `s="$1"; shift
while [ $# -gt 1 ]; do mkdir -p "$s/$(dirname "$1")" && ln -sfn "$2" "$s/$1" || exit 7; shift 2; done`;

function located(recipe: Recipe, node: ClusterNode): { hub: string; repo: string; revision?: string } {
  const loc = weightsLocation(recipe, node);
  if (loc === undefined) throw new UserError(`node ${node.name}: the HF cache path uses ~ but the node's user is unknown`, `set user (or home) for ${node.name} in the cluster file`);
  return loc;
}

/** `signal` ends the checks still running (a cache on a hung network filesystem must not hold up a Ctrl-C). */
export async function weightsReport(recipe: Recipe, session: ClusterSession, nodes: readonly ClusterNode[], signal?: AbortSignal): Promise<NodeWeights[]> {
  return Promise.all(
    nodes.map(async (node): Promise<NodeWeights> => {
      const loc = located(recipe, node);
      const path = `${loc.hub}/${loc.repo}`;
      const r = await (session.docker.get(node.name) as DockerClient).transport.exec(["sh", "-c", CHECK_SCRIPT, "sh", path, loc.revision ?? ""], { timeoutMs: 60_000, ...(signal === undefined ? {} : { signal }) });
      if (r.code !== 0) throw new RemoteError(node.name, `checking the weights in ${path} failed (exit ${r.code})`, r.stderr);
      const [word, ...rest] = r.stdout.trim().split(" ");
      if (word === "ok") return { node: node.name, path, present: true, revision: rest[0] as string, files: Number(rest[1]), ...(/^\d+$/.test(rest[2] ?? "") ? { bytes: Number(rest[2]) } : {}) };
      return { node: node.name, path, present: false, reason: rest.join(" ") };
    }),
  );
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
}

const ok = (docker: DockerClient, argv: readonly string[], what: string): Promise<string> => execChecked(docker.transport, argv, what, 120_000);

/** Streams one file's bytes from `offset` on: source `tail -c` into the target's partial file, through this machine. */
async function copyFrom(source: DockerClient, target: DockerClient, from: string, to: string, offset: number, signal: AbortSignal, onBytes: (n: number) => void): Promise<void> {
  const read = source.transport.spawn(["tail", "-c", `+${offset + 1}`, from]);
  read.stdin.end();
  const write = target.transport.spawn(APPEND(to));
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
    if (r.code !== 0) throw new RemoteError(source.node, `reading ${from} failed (exit ${r.code})`, r.stderr);
    if (w.code !== 0) throw new RemoteError(target.node, `writing ${to} failed (exit ${w.code})`, w.stderr);
  } finally {
    signal.removeEventListener("abort", abort);
  }
}

/** How many files of a snapshot move at the same time. */
const FILES_AT_ONCE = 4;

const APPEND = (to: string): string[] => ["sh", "-c", 'cat >> "$1"', "sh", to];
const interrupted = (): UserError => new UserError("interrupted: the partial copy stays and a new `launcher models sync` resumes it");

/** One file of the snapshot to bring to the nodes that lack it: a blob, or a plain file of the snapshot folder. */
interface FileJob {
  readonly label: string;
  readonly from: string;
  readonly size: number;
  readonly sha256?: string;
  /** Its final path on a node, given the node's repo folder. */
  readonly to: (repo: string) => string;
  /** Bytes each node that needs it already holds (its partial file). */
  readonly offsets: ReadonlyMap<string, number>;
  readonly blob: boolean;
}

/**
 * Copies the snapshot (only the files of that revision and the blobs they point to) from a node
 * that has it to every node that lacks it. Node to node by default: for each file, a chain from
 * the source through every node that needs it (runChain), each writing what it lacks while it
 * passes every byte on; a node the chain cannot serve gets the relay through this machine, and
 * why is said (options.relay: all of them). A blob is written to NAME.launcher-partial and moved
 * into place once its size (and SHA-256, where its name is one) checks out, so an interrupted sync
 * resumes from the bytes already there, whichever way they came.
 */
export async function syncWeights(recipe: Recipe, session: ClusterSession, nodes: readonly ClusterNode[], progress: TransferProgress, signal: AbortSignal, options: SyncOptions = {}): Promise<SyncResult> {
  const report = await weightsReport(recipe, session, nodes);
  const sourceReport = report.find((r) => r.present);
  if (sourceReport === undefined) {
    throw new UserError(`model ${recipe.model} is on no node:\n${report.map((r) => `  - ${r.node}: ${r.reason ?? "?"} (${r.path})`).join("\n")}`, "download it on one node first (huggingface-cli download), then sync");
  }
  const revision = sourceReport.revision as string;
  const source = session.docker.get(sourceReport.node) as DockerClient;
  const sourceLoc = located(recipe, nodes.find((n) => n.name === sourceReport.node) as ClusterNode);
  const sourceRepo = `${sourceLoc.hub}/${sourceLoc.repo}`;
  const files: SnapshotFile[] = parseSnapshotListing(await ok(source, ["sh", "-c", LIST_SCRIPT, "sh", `${sourceRepo}/snapshots/${revision}`], "listing the snapshot"));
  const blobs = new Map<string, { size: number; sha256?: string }>();
  for (const f of files) {
    if (f.link === undefined) continue;
    const name = f.link.split("/").pop() as string;
    const sha = blobSha256(f.link);
    blobs.set(name, { size: f.size, ...(sha === undefined ? {} : { sha256: sha }) });
  }

  const targets = report.filter((r) => !r.present);
  const docker = (node: string): DockerClient => session.docker.get(node) as DockerClient;
  const repoOf = new Map(targets.map((t) => [t.node, t.path]));
  // Before any byte moves: every target has room for what it lacks, and the hop's tools. Asked
  // while the folders are made and the blobs read (one round trip fewer before the bytes).
  const routes = clusterRoutes(session.cluster.nodes);
  const probe = (node: string, path: string): Promise<NodeProbe> => ok(docker(node), ["sh", "-c", PROBE_SCRIPT, "sh", "path", path], "checking the node before the sync").then((out) => parseProbe(node, out));
  const probing = handled(Promise.all([
    options.relay === undefined && targets.length > 0 ? probe(source.node, sourceRepo) : Promise.resolve(undefined),
    Promise.all(targets.map((t) => probe(t.node, t.path))),
  ]));
  // Each target's partial and complete blobs: what it still needs, and from which byte.
  const states = await Promise.all(
    targets.map(async (t) => {
      const target = docker(t.node);
      await ok(target, ["mkdir", "-p", `${t.path}/blobs`, `${t.path}/refs`, `${t.path}/snapshots/${revision}`], "making the cache folders");
      const state = (await ok(target, ["sh", "-c", BLOB_STATE_SCRIPT, "sh", `${t.path}/blobs`, ...blobs.keys()], "reading the blobs there"))
        .split("\n")
        .filter(Boolean)
        .map((l) => l.split(" "));
      const offsets = new Map<string, number>();
      for (const [name, complete, partial] of state) {
        const blob = blobs.get(name as string);
        if (blob === undefined || Number(complete) === blob.size) continue;
        const have = Number(partial);
        if (have > blob.size) await ok(target, ["rm", "-f", `${t.path}/blobs/${name}${PARTIAL}`], "removing an oversized partial blob");
        offsets.set(name as string, have > 0 && have <= blob.size ? have : 0);
      }
      await Promise.all(
        files.filter((x) => x.link === undefined).map((f) => ok(target, ["sh", "-c", `mkdir -p "$(dirname "$1")" && rm -f "$1${PARTIAL}"`, "sh", `${t.path}/snapshots/${revision}/${f.path}`], "preparing a plain file")),
      );
      return { node: t.node, offsets };
    }),
  );
  const jobs: FileJob[] = [
    ...[...blobs].map(([name, b]): FileJob => ({
      label: name.slice(0, 16),
      from: `${sourceRepo}/blobs/${name}`,
      size: b.size,
      ...(b.sha256 === undefined ? {} : { sha256: b.sha256 }),
      to: (repo) => `${repo}/blobs/${name}`,
      offsets: new Map(states.flatMap((s) => (s.offsets.has(name) ? [[s.node, s.offsets.get(name) as number] as const] : []))),
      blob: true,
    })),
    ...files.filter((x) => x.link === undefined).map((f): FileJob => ({
      label: f.path,
      from: `${sourceRepo}/snapshots/${revision}/${f.path}`,
      size: f.size,
      to: (repo) => `${repo}/snapshots/${revision}/${f.path}`,
      offsets: new Map(targets.map((t) => [t.node, 0])),
      blob: false,
    })),
  ];

  const [sourceProbe, probes] = await probing;
  const need = new Map(targets.map((t) => [t.node, jobs.reduce((sum, j) => sum + (j.offsets.has(t.node) ? j.size - (j.offsets.get(t.node) ?? 0) : 0), 0)]));
  checkSpace(probes, need, `model ${recipe.model}`);
  const plan = planRoutes(source.node, sourceProbe, probes, routes, options.relay);
  const relayWhy = new Map(plan.relay.map((r) => [r.node, r.why]));
  const sayRelay = (node: string, why: string): void => {
    // Files go several at once: the first to find a node unreachable says why, once.
    if (relayWhy.has(node)) return;
    relayWhy.set(node, why);
    if (options.relay === undefined) progress.note?.(`  ${node.padEnd(10)} through this machine: ${why}`);
  };
  for (const r of plan.relay) sayRelay(r.node, r.why);

  const totals = new Map(targets.map((t) => [t.node, { bytes: 0, resumed: 0, blobs: 0, from: undefined as string | undefined, path: undefined as TransferPath | undefined }]));
  // Bytes of the files still on their way, per node: the progress line is what is done plus these.
  const moving = new Map<string, Map<FileJob, number>>(targets.map((t) => [t.node, new Map()]));
  const landed = (node: string, job: FileJob, bytes: number): void => {
    (totals.get(node) as { bytes: number }).bytes += bytes;
    moving.get(node)?.delete(job);
  };
  // Several files at once: a file's own costs (starting its hops, linking the chain, checking the
  // file at the end: round trips, not bytes) overlap another's bytes, and small files (config,
  // tokenizer) no longer wait one after another. An interrupt stops each file's own transfer
  // (runChain, copyFrom) and is thrown once they all ended, as the first failure.
  await inPool(jobs, FILES_AT_ONCE, undefined, async (job) => {
    if (signal.aborted) throw interrupted();
    const needing = [...job.offsets.keys()];
    if (needing.length === 0) return;
    for (const n of needing) (totals.get(n) as { resumed: number }).resumed += job.offsets.get(n) ?? 0;
    const show = (node: string, bytes: number, detail: string): void => {
      const m = moving.get(node) as Map<FileJob, number>;
      m.set(job, bytes);
      progress.node(node, (totals.get(node)?.bytes ?? 0) + [...m.values()].reduce((a, b) => a + b, 0), false, `${job.label}  ${detail}`);
    };
    const direct = plan.direct.filter((r) => needing.includes(r.node) && !relayWhy.has(r.node));
    const relayOne = async (node: string, branch: AbortSignal): Promise<void> => {
      let n = 0;
      await copyFrom(source, docker(node), job.from, `${job.to(repoOf.get(node) as string)}${PARTIAL}`, job.offsets.get(node) ?? 0, branch, (c) => {
        n += c;
        show(node, n, "through this machine");
      });
      landed(node, job, n);
      (totals.get(node) as { path?: TransferPath }).path = "relay";
    };
    const chain = async (branch: AbortSignal): Promise<void> => {
      if (direct.length === 0) return;
      const from = Math.min(...direct.map((r) => job.offsets.get(r.node) ?? 0));
      const out = await runChain(
        { node: source.node, transport: source.transport, command: ["tail", "-c", `+${from + 1}`, "--", job.from] },
        direct.map((r) => ({ ...r, transport: docker(r.node).transport, sink: APPEND(`${job.to(repoOf.get(r.node) as string)}${PARTIAL}`), skip: (job.offsets.get(r.node) ?? 0) - from })),
        (node, bytes) => show(node, Math.max(0, bytes - ((job.offsets.get(node) ?? 0) - from)), `over ${routes.get(node)?.path ?? "?"}`),
        { signal: branch },
      );
      if (branch.aborted) throw interrupted();
      if (out.failed.length > 0) throw new RemoteError(out.failed.map((f) => f.node).join(", "), `sending ${job.label} node to node failed`, out.failed.map((f) => `${f.node}: ${f.why}`).join("\n"), "run the sync again: it resumes; --relay sends through this machine instead");
      for (const d of out.delivered) {
        landed(d.node, job, d.bytes - ((job.offsets.get(d.node) ?? 0) - from));
        const t = totals.get(d.node) as { from?: string; path?: TransferPath };
        t.from = d.from;
        t.path = d.path;
      }
      for (const u of out.unreached) sayRelay(u.node, u.why);
      await together(branch, out.unreached.map((u) => (b: AbortSignal) => relayOne(u.node, b)));
    };
    await together(signal, [chain, ...needing.filter((n) => relayWhy.has(n) && !direct.some((r) => r.node === n)).map((n) => (b: AbortSignal) => relayOne(n, b))]);
    await Promise.all(
      needing.map(async (n) => {
        await ok(docker(n), finishFile(job.to(repoOf.get(n) as string), job.size, job.sha256), `checking ${job.label}`);
        if (job.blob) (totals.get(n) as { blobs: number }).blobs++;
      }),
    );
  });
  const links = files.filter((x) => x.link !== undefined).flatMap((x) => [x.path, x.link as string]);
  await Promise.all(
    targets.map(async (t) => {
      const target = docker(t.node);
      await ok(target, ["sh", "-c", LINK_SCRIPT, "sh", `${t.path}/snapshots/${revision}`, ...links], "linking the snapshot");
      if (sourceLoc.revision === undefined) await ok(target, ["sh", "-c", 'printf %s "$2" > "$1"', "sh", `${t.path}/refs/main`, revision], "writing refs/main");
      progress.node(t.node, totals.get(t.node)?.bytes ?? 0, true);
    }),
  );
  const after = await weightsReport(recipe, session, nodes);
  const still = after.filter((a) => !a.present);
  if (still.length > 0) throw new RemoteError(still.map((s) => s.node).join(", "), "after the sync the snapshot is still incomplete", still.map((s) => `${s.node}: ${s.reason ?? "?"}`).join("\n"));
  return {
    source: sourceReport.node,
    revision,
    nodes: report.map((r): SyncedNode => {
      const t = totals.get(r.node);
      if (r.present || t === undefined) return { node: r.node, action: "had", bytes: 0, resumed_bytes: 0, blobs: 0 };
      const why = relayWhy.get(r.node);
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
    }),
  };
}
