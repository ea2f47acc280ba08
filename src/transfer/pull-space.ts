import { RemoteError, UserError } from "../config/errors.js";
import { redactText } from "../config/redact.js";
import { modelInfoUrl, parseBlobListing, parseModelInfo, RESUMED_PARTIAL, STALE_PARTIAL, stillNeeded, type HubFile, type StillNeeded } from "../plan/pull-space.js";
import type { Transport } from "../remote/transport.js";
import { execChecked } from "../remote/transport.js";
import { checkSpace, parseProbe, PROBE_SCRIPT } from "./route.js";
import { mib } from "../nodes/progress.js";

/** Where huggingface_hub's Hub is when HF_ENDPOINT is not set (constants.py ENDPOINT). */
const HUB = "https://huggingface.co";

// The node asks the Hub, not this machine: the node downloads, so its network, DNS and reach of
// HF_ENDPOINT (a mirror on the cluster's network, say) are what count, and this machine may be a
// laptop that cannot reach it. The token goes on curl's stdin as a header line (`--header @-`,
// curl 7.55+: "@- makes curl read the header file from stdin"), so it is in no argv and no
// environment on the node, and only in the Authorization header, never in the URL.
// $1 the URL. Exit 127 when the node has no curl. Prints the body, then the HTTP status alone on the last line.
const HUB_ASK_SCRIPT = `command -v curl >/dev/null 2>&1 || exit 127
exec curl --silent --show-error --location --max-time 60 --proto =http,https --header @- --write-out '\\n%{http_code}' -- "$1"`;

// $1 the blobs folder: each file in it as `NAME SIZE`.
const BLOBS_SCRIPT = `[ -d "$1" ] || exit 0
find "$1" -mindepth 1 -maxdepth 1 -type f -printf '%f %s\\n'`;

// $1 the hub folder, $2 the repo folder's name, then names of stale partial blobs
// (ETAG.<8 hex>.incomplete). huggingface_hub writes one while it holds the blob's lock, an flock(2)
// on HUB/.locks/REPO/ETAG.lock (file_download.py: WeakFileLock(lock_path) around
// _download_to_tmp_and_move; utils/_fixes.py WeakFileLock -> filelock's UnixFileLock,
// fcntl.flock LOCK_EX|LOCK_NB). A killed writer's lock goes with its process, so a partial whose
// lock nobody holds (or that has no lock file at all) has no writer, and is removed as `hf cache
// prune` removes every blobs/*.incomplete (cli/cache.py, utils/_cache_manager.py
// _scan_incomplete_files). One still locked is a live download: left alone. Without flock(1) a
// locked one is kept too. Prints `removed NAME` for each removed.
const CLEAN_SCRIPT = `hub="$1"; repo="$2"; shift 2
for n in "$@"; do
  f="$hub/$repo/blobs/$n"; l="$hub/.locks/$repo/\${n%%.*}.lock"
  if [ ! -e "$l" ]; then rm -f -- "$f" && echo "removed $n"
  elif command -v flock >/dev/null 2>&1; then flock -n "$l" rm -f -- "$f" && echo "removed $n"; fi
done
exit 0`;

export interface PullSpace extends StillNeeded {
  /** The commit the Hub resolved the revision to. */
  readonly commit: string;
  readonly free?: number;
  /** Stale partial files removed, and their bytes. */
  readonly cleaned: { readonly files: number; readonly bytes: number };
}

/** The model's files at the revision, as the node sees the Hub. */
async function askHub(transport: Transport, url: string, token: string, signal: AbortSignal): Promise<{ commit: string; files: HubFile[] }> {
  // A line break would end the header and start another one: the token is one line or none.
  if (/[\r\n]/.test(token)) throw new UserError("the Hugging Face token has a line break in it", "give the token alone on one line (HF_TOKEN or --token-file)");
  const r = await transport.exec(["sh", "-c", HUB_ASK_SCRIPT, "sh", url], { stdin: token === "" ? "" : `Authorization: Bearer ${token}\n`, timeoutMs: 90_000, signal });
  const secrets = token === "" ? [] : [token];
  if (r.code === 127) throw new UserError(`${transport.node} has no curl to ask the Hub the model's size before the download`, `install curl on ${transport.node} (apt-get install curl)`);
  const lines = r.stdout.replace(/\n$/, "").split("\n");
  const status = lines.pop() ?? "";
  const body = lines.join("\n");
  if (r.code !== 0) throw new RemoteError(transport.node, `asking the Hub at ${url} failed (curl exit ${r.code})`, redactText(r.stderr.trim(), secrets), "check HF_ENDPOINT and the node's network");
  if (status !== "200") {
    const said = /"error"\s*:\s*"([^"]*)"/.exec(body)?.[1] ?? body.slice(0, 200);
    throw new RemoteError(transport.node, `the Hub answered HTTP ${status} to ${url}`, redactText(said, secrets), status === "401" || status === "403" ? "a gated or private model needs HF_TOKEN (or --token-file) with access to it" : "check the model's name, its pinned revision and HF_ENDPOINT");
  }
  const info = parseModelInfo(body);
  if (info === undefined) throw new RemoteError(transport.node, `the answer of ${url} is not the Hub's model info with file sizes`, redactText(body.slice(0, 200), secrets), "check HF_ENDPOINT: it must be the Hub or a mirror of its API");
  return info;
}

/**
 * Before the download: the node that downloads has room for what the model still needs there
 * (huggingface_hub itself only warns, per file, once it is downloading: file_download.py
 * _check_disk_space; a full disk then fails half way, many GB in).
 * The Hub's file sizes at the revision (as the node sees the Hub), less the blobs its cache has
 * whole and the bytes of a partial blob the downloader resumes; stale per-process partials of a
 * killed huggingface_hub are removed first (CLEAN_SCRIPT), since nothing will ever resume them.
 * The free space is measured after that, by the same probe `models sync` uses, and a shortfall is
 * the same error naming node, path, free and needed. The other nodes are checked by the sync that
 * follows, before it copies a byte: only then is it known whether they share this cache (a NAS),
 * in which case they need nothing.
 */
export async function checkPullSpace(transport: Transport, where: { readonly hub: string; readonly repo: string; readonly revision?: string; readonly files?: readonly string[] }, hub: { readonly endpoint?: string; readonly token: string; readonly model: string }, signal: AbortSignal): Promise<PullSpace> {
  const url = modelInfoUrl(hub.endpoint ?? HUB, hub.model, where.revision ?? "main");
  const blobsDir = `${where.hub}/${where.repo}/blobs`;
  const [info, listing] = await Promise.all([askHub(transport, url, hub.token, signal), execChecked(transport, ["sh", "-c", BLOBS_SCRIPT, "sh", blobsDir], "listing the cached blobs")]);
  let onDisk = parseBlobListing(listing);
  const stale = onDisk.filter((e) => STALE_PARTIAL.test(e.name));
  let cleaned = { files: 0, bytes: 0 };
  if (stale.length > 0) {
    const out = await execChecked(transport, ["sh", "-c", CLEAN_SCRIPT, "sh", where.hub, where.repo, ...stale.map((e) => e.name)], "removing stale partial downloads");
    const removed = new Set(out.split("\n").flatMap((l) => (l.startsWith("removed ") ? [l.slice(8)] : [])));
    cleaned = { files: removed.size, bytes: stale.filter((e) => removed.has(e.name)).reduce((s, e) => s + e.bytes, 0) };
    onDisk = onDisk.filter((e) => !removed.has(e.name));
  }
  // Only the files the download takes (the recipe's GGUF files, when it names them).
  const wanted = where.files === undefined ? undefined : new Set(where.files);
  const need = stillNeeded(wanted === undefined ? info.files : info.files.filter((f) => wanted.has(f.path)), onDisk, RESUMED_PARTIAL.download);
  const probe = parseProbe(transport.node, await execChecked(transport, ["sh", "-c", PROBE_SCRIPT, "sh", "path", `${where.hub}/${where.repo}`], "measuring the free space"));
  checkSpace(
    [probe],
    new Map([[transport.node, need.bytes]]),
    `${hub.model} at ${info.commit.slice(0, 12)} (${need.blobs} files still to download${need.resumed > 0 ? `, ${mib(need.resumed)} of them already there` : ""})`,
    `free space there (hf cache prune; old snapshots in ${where.hub}), point the recipe's HF_HOME mount at a larger disk, or download on another node with --node; nothing was downloaded`,
  );
  return { ...need, commit: info.commit, ...(probe.free === undefined ? {} : { free: probe.free }), cleaned };
}
