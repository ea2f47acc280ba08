#!/usr/bin/env node
// hub-standin: a small Hugging Face Hub-compatible file server for the practice cluster (NOT the
// Hub). It serves model repos from a folder, one commit each, on the endpoints huggingface_hub
// really calls, so that `launcher models pull` (and a real huggingface_hub, HF_ENDPOINT=this) can
// download from it without anything leaving this machine:
//
//   GET  /api/models/NS/NAME[/revision/REV]   repo_info: {id, sha, siblings[{rfilename}]}
//        (hf_api.py model_info: f"{endpoint}/api/models/{repo_id}/revision/{quote(revision)}";
//        snapshot_download takes .sha, and older versions the file list from .siblings);
//        with ?blobs=true siblings[{rfilename, size, blobId, lfs?: {size, sha256, pointerSize}}]
//        (model_info(files_metadata=True): what `launcher models pull` sizes the download by)
//   GET  /api/models/NS/NAME/tree/REV          list_repo_tree (recursive), as snapshot_download of
//        huggingface_hub 1.x lists the files: [{type, oid, size, path, lfs?}] (size: the file's,
//        for an LFS file too, as hf_api.py RepoFile.size)
//   HEAD /NS/NAME/resolve/REV/PATH              get_hf_file_metadata (file_download.py): reads
//        X-Repo-Commit, X-Linked-Etag or ETag (the blob's name in the cache), X-Linked-Size or
//        Content-Length (the expected size)
//   GET  /NS/NAME/resolve/REV/PATH              http_get: honours `Range: bytes=N-` (206 +
//        Content-Range), which is how huggingface_hub resumes BLOB.incomplete
//
// A file of 1 MiB or more is treated as an LFS file (ETag = its SHA-256, as the Hub's for LFS),
// a smaller one as a git file (ETag = its git blob SHA-1). REV is "main" or the commit.
//
//   node hub-standin.mjs --root DIR --listen IP:PORT --commit SHA [--token-file F] [--rate BYTES_PER_S]
//
// DIR/NS/NAME/ holds the repo's files. With --token-file, every request must carry
// `Authorization: Bearer <that token>` (a gated repo), else 401. With --rate, file bodies are sent
// at most that fast (so that a test can interrupt a download half way). Each request is logged on
// stdout as one JSON line {method, path, range, status, bytes, auth}; the token itself never is.
import { createHash } from "node:crypto";
import { createReadStream, readdirSync, readFileSync, statSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";

const opt = {};
for (let i = 2; i < process.argv.length; i += 2) opt[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
if (!opt.root || !opt.listen || !/^[0-9a-f]{40}$/.test(opt.commit ?? "")) {
  process.stderr.write("usage: hub-standin.mjs --root DIR --listen IP:PORT --commit SHA40 [--token-file F] [--rate BYTES_PER_S]\n");
  process.exit(2);
}
const token = opt["token-file"] ? readFileSync(opt["token-file"], "utf8").trim() : undefined;
const rate = Number(opt.rate ?? 0);
const LFS_MIN = 1 << 20;

/** Files of a repo (relative paths), with size and etag, computed once per repo. */
const repos = new Map();
function repo(id) {
  if (repos.has(id)) return repos.get(id);
  const dir = path.join(opt.root, id);
  let files;
  try {
    files = walk(dir).map((rel) => {
      const full = path.join(dir, rel);
      const size = statSync(full).size;
      const data = readFileSync(full);
      const lfs = size >= LFS_MIN;
      const sha256 = createHash("sha256").update(data).digest("hex");
      const gitSha1 = createHash("sha1").update(`blob ${size}\0`).update(data).digest("hex");
      return { path: rel, full, size, lfs, sha256, gitSha1, etag: lfs ? sha256 : gitSha1 };
    });
  } catch {
    files = undefined;
  }
  repos.set(id, files);
  return files;
}
function walk(dir, prefix = "") {
  // Sorted, as the Hub lists a repo's files: the order a client downloads them in is then known.
  return readdirSync(dir, { withFileTypes: true })
    .sort((a, b) => (a.name < b.name ? -1 : 1))
    .flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`]));
}

const ROUTES = [
  [/^\/api\/models\/([^/]+\/[^/]+)(?:\/revision\/([^/]+))?$/, info],
  [/^\/api\/models\/([^/]+\/[^/]+)\/tree\/([^/]+)(?:\/.*)?$/, tree],
  [/^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/, resolve],
];

function fail(res, status, code, message) {
  res.writeHead(status, { "Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message });
  res.end(JSON.stringify({ error: message }));
  return { status, bytes: 0 };
}

function revisionOk(rev) {
  return rev === undefined || rev === "main" || rev === opt.commit;
}

function info(req, res, id, rev) {
  const files = repo(id);
  if (files === undefined) return fail(res, 404, "RepoNotFound", "Repository Not Found");
  if (!revisionOk(rev)) return fail(res, 404, "RevisionNotFound", `Invalid rev id: ${rev}`);
  res.writeHead(200, { "Content-Type": "application/json" });
  // With blobs=true (huggingface_hub's model_info(files_metadata=True) sends blobs=True, httpx
  // blobs=true) each sibling also carries its size, git blob id and, for an LFS file, lfs {size,
  // sha256, pointerSize}, as the Hub answers (hf_api.py ModelInfo reads exactly these keys).
  const blobs = /^true$/i.test(new URL(req.url ?? "/", "http://hub").searchParams.get("blobs") ?? "");
  const sibling = (f) => (blobs ? { rfilename: f.path, size: f.size, blobId: f.gitSha1, ...(f.lfs ? { lfs: { size: f.size, sha256: f.sha256, pointerSize: 134 } } : {}) } : { rfilename: f.path });
  res.end(JSON.stringify({ _id: id, id, modelId: id, sha: opt.commit, private: false, gated: token ? "manual" : false, siblings: files.map(sibling) }));
  return { status: 200, bytes: 0 };
}

function tree(req, res, id, rev) {
  const files = repo(id);
  if (files === undefined) return fail(res, 404, "RepoNotFound", "Repository Not Found");
  if (!revisionOk(rev)) return fail(res, 404, "RevisionNotFound", `Invalid rev id: ${rev}`);
  res.writeHead(200, { "Content-Type": "application/json" });
  res.end(JSON.stringify(files.map((f) => ({ type: "file", oid: f.gitSha1, size: f.size, path: f.path, ...(f.lfs ? { lfs: { oid: f.sha256, size: f.size, pointerSize: 134 } } : {}) }))));
  return { status: 200, bytes: 0 };
}

async function resolve(req, res, id, rev, file) {
  const files = repo(id);
  if (files === undefined) return fail(res, 404, "RepoNotFound", "Repository Not Found");
  if (!revisionOk(rev)) return fail(res, 404, "RevisionNotFound", `Invalid rev id: ${rev}`);
  const f = files.find((x) => x.path === decodeURIComponent(file));
  if (f === undefined) return fail(res, 404, "EntryNotFound", `Entry not found: ${file}`);
  const headers = { "X-Repo-Commit": opt.commit, ETag: `"${f.etag}"`, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream" };
  if (f.lfs) Object.assign(headers, { "X-Linked-Etag": `"${f.sha256}"`, "X-Linked-Size": String(f.size) });
  const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
  const start = m ? Number(m[1]) : 0;
  if (start > f.size || (m && start === f.size && f.size > 0)) {
    res.writeHead(416, { ...headers, "Content-Range": `bytes */${f.size}` });
    res.end();
    return { status: 416, bytes: 0 };
  }
  const status = m ? 206 : 200;
  res.writeHead(status, { ...headers, "Content-Length": String(f.size - start), ...(m ? { "Content-Range": `bytes ${start}-${f.size - 1}/${f.size}` } : {}) });
  if (req.method === "HEAD") {
    res.end();
    return { status, bytes: 0 };
  }
  let bytes = 0;
  const began = Date.now();
  const stream = createReadStream(f.full, { start, highWaterMark: 64 * 1024 });
  // A client that goes away never drains. Its close is listened for once, before the first write:
  // a listener added at each wait missed a close that came while the next chunk was read, and
  // that request then waited forever and was never logged (CI, stop 22).
  let gone = false;
  const closed = new Promise((r) => res.once("close", () => r((gone = true))));
  try {
    for await (const chunk of stream) {
      if (gone || res.destroyed) break;
      if (!res.write(chunk)) await Promise.race([new Promise((r) => res.once("drain", r)), closed]);
      bytes += chunk.length;
      if (rate > 0) {
        const ahead = (bytes / rate) * 1000 - (Date.now() - began);
        if (ahead > 0) await Promise.race([new Promise((r) => setTimeout(r, ahead)), closed]);
      }
    }
  } finally {
    stream.destroy();
    res.end();
  }
  return { status, bytes };
}

const server = createServer(async (req, res) => {
  const url = new URL(req.url ?? "/", "http://hub");
  const auth = req.headers.authorization;
  const entry = { method: req.method, path: url.pathname, range: req.headers.range ?? null, auth: auth !== undefined };
  let outcome;
  if (token !== undefined && auth !== `Bearer ${token}`) {
    outcome = fail(res, 401, "GatedRepo", "Access to this model is restricted: a valid token is needed");
  } else {
    const route = ROUTES.map(([re, fn]) => [re.exec(url.pathname), fn]).find(([m]) => m !== null);
    outcome = route === undefined ? fail(res, 404, "NotFound", "not found") : await route[1](req, res, ...route[0].slice(1));
  }
  process.stdout.write(`${JSON.stringify({ ...entry, ...outcome })}\n`);
});
const [host, port] = opt.listen.split(":");
server.listen(Number(port), host, () => process.stdout.write(`${JSON.stringify({ listening: opt.listen })}\n`));
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => process.exit(0));
