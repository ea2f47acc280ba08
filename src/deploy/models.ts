import type { ClusterNode } from "../cluster/cluster.js";
import { RemoteError, UserError } from "../config/errors.js";
import { blobSha256, parseSnapshotListing, weightsLocation, type SnapshotFile } from "../plan/weights.js";
import type { Recipe } from "../recipe/recipe.js";
import type { DockerClient } from "../remote/docker.js";
import { execChecked } from "../remote/transport.js";
import { joinPipe } from "./images.js";
import type { TransferProgress } from "./progress.js";
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

// $1 the blobs folder, then blob names: `NAME COMPLETE_SIZE PARTIAL_SIZE` (-1: absent).
const BLOB_STATE_SCRIPT = `b="$1"; shift
for n in "$@"; do
  c=$(stat -c %s "$b/$n" 2>/dev/null || echo -1); p=$(stat -c %s "$b/$n.launcher-partial" 2>/dev/null || echo -1)
  echo "$n $c $p"
done`;

// $1 the file, $2 the expected size, $3 the sha256 or "": moves FILE.launcher-partial into place.
const FINISH_SCRIPT = `f="$1"; p="$1.launcher-partial"
s=$(stat -c %s "$p") || exit 4
[ "$s" -eq "$2" ] || { echo "size $s, expected $2"; exit 5; }
if [ -n "$3" ]; then h=$(sha256sum "$p" | cut -d' ' -f1); [ "$h" = "$3" ] || { rm -f "$p"; echo "sha256 $h, expected $3"; exit 6; }; fi
mv -f "$p" "$f"`;

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
  readonly nodes: readonly { node: string; action: "had" | "copied"; bytes: number; resumed_bytes: number; blobs: number }[];
}

const ok = (docker: DockerClient, argv: readonly string[], what: string): Promise<string> => execChecked(docker.transport, argv, what, 120_000);

/** Streams one file's bytes from `offset` on: source `tail -c` into the target's partial file. */
async function copyFrom(source: DockerClient, target: DockerClient, from: string, to: string, offset: number, signal: AbortSignal, onBytes: (n: number) => void): Promise<void> {
  const read = source.transport.spawn(["tail", "-c", `+${offset + 1}`, from]);
  read.stdin.end();
  const write = target.transport.spawn(["sh", "-c", 'cat >> "$1"', "sh", to]);
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
    if (signal.aborted) throw new UserError("interrupted: the partial copy stays and a new `launcher models sync` resumes it");
    if (r.code !== 0) throw new RemoteError(source.node, `reading ${from} failed (exit ${r.code})`, r.stderr);
    if (w.code !== 0) throw new RemoteError(target.node, `writing ${to} failed (exit ${w.code})`, w.stderr);
  } finally {
    signal.removeEventListener("abort", abort);
  }
}

/**
 * Copies the snapshot (only the files of that revision and the blobs they point to) from a node
 * that has it to every node that lacks it, through this machine. A blob is written to
 * NAME.launcher-partial and moved into place once its size (and SHA-256, where its name is one)
 * checks out, so an interrupted sync resumes from the bytes already there.
 */
export async function syncWeights(recipe: Recipe, session: ClusterSession, nodes: readonly ClusterNode[], progress: TransferProgress, signal: AbortSignal): Promise<SyncResult> {
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

  const results = await Promise.all(
    report.map(async (r) => {
      if (r.present) return { node: r.node, action: "had" as const, bytes: 0, resumed_bytes: 0, blobs: 0 };
      const target = session.docker.get(r.node) as DockerClient;
      const repo = r.path;
      await ok(target, ["mkdir", "-p", `${repo}/blobs`, `${repo}/refs`, `${repo}/snapshots/${revision}`], "making the cache folders");
      const state = (await ok(target, ["sh", "-c", BLOB_STATE_SCRIPT, "sh", `${repo}/blobs`, ...blobs.keys()], "reading the blobs there"))
        .split("\n")
        .filter(Boolean)
        .map((l) => l.split(" "));
      let bytes = 0;
      let resumed = 0;
      let copied = 0;
      for (const [name, complete, partial] of state) {
        const blob = blobs.get(name as string);
        if (blob === undefined || Number(complete) === blob.size) continue;
        const have = Number(partial);
        const offset = have > 0 && have <= blob.size ? have : 0;
        if (have > blob.size) await ok(target, ["rm", "-f", `${repo}/blobs/${name}.launcher-partial`], "removing an oversized partial blob");
        resumed += offset;
        await copyFrom(source, target, `${sourceRepo}/blobs/${name}`, `${repo}/blobs/${name}.launcher-partial`, offset, signal, (n) => {
          bytes += n;
          progress.node(r.node, bytes, false, (name as string).slice(0, 16));
        });
        await ok(target, ["sh", "-c", FINISH_SCRIPT, "sh", `${repo}/blobs/${name}`, String(blob.size), blob.sha256 ?? ""], `checking blob ${name}`);
        copied++;
      }
      for (const f of files.filter((x) => x.link === undefined)) {
        const to = `${repo}/snapshots/${revision}/${f.path}`;
        await ok(target, ["sh", "-c", 'mkdir -p "$(dirname "$1")" && rm -f "$1.launcher-partial"', "sh", to], "preparing a plain file");
        await copyFrom(source, target, `${sourceRepo}/snapshots/${revision}/${f.path}`, `${to}.launcher-partial`, 0, signal, (n) => {
          bytes += n;
          progress.node(r.node, bytes, false, f.path);
        });
        await ok(target, ["sh", "-c", FINISH_SCRIPT, "sh", to, String(f.size), ""], `checking ${f.path}`);
      }
      const links = files.filter((x) => x.link !== undefined).flatMap((x) => [x.path, x.link as string]);
      await ok(target, ["sh", "-c", LINK_SCRIPT, "sh", `${repo}/snapshots/${revision}`, ...links], "linking the snapshot");
      if (sourceLoc.revision === undefined) await ok(target, ["sh", "-c", 'printf %s "$2" > "$1"', "sh", `${repo}/refs/main`, revision], "writing refs/main");
      progress.node(r.node, bytes, true);
      return { node: r.node, action: "copied" as const, bytes, resumed_bytes: resumed, blobs: copied };
    }),
  );
  const after = await weightsReport(recipe, session, nodes);
  const still = after.filter((a) => !a.present);
  if (still.length > 0) throw new RemoteError(still.map((s) => s.node).join(", "), "after the sync the snapshot is still incomplete", still.map((s) => `${s.node}: ${s.reason ?? "?"}`).join("\n"));
  return { source: sourceReport.node, revision, nodes: results };
}
