import { existsSync } from "node:fs";
import path from "node:path";
import { RemoteError, UserError } from "../config/errors.js";
import { buildOrder, fromImages, type ImageFolder } from "../plan/image-build.js";
import type { Docker } from "../remote/docker.js";
import { transferProgress, type TransferProgress } from "../nodes/progress.js";
import { execChecked, spawnLocal, type RawProcess } from "../remote/transport.js";
import { runChain, startSource, type StartedSource } from "./chain.js";
import { dockerSave, withDockerApi } from "./docker-api.js";
import { diffIdsOf, layerEntries, leftOut, saveWithout, TAR_FILTER_PERL, type LayerSkip } from "./layers.js";
import { checkSpace, parseProbe, planRoutes, pushSkip, PROBE_SCRIPT, type NodeProbe, type NodeRoute, type RoutePlan, type TransferPath } from "./route.js";
import { together } from "./together.js";
import { abortable, checkInterrupted } from "../config/abort.js";

// Callers that build or push read the folders from here as well.
export { imageFolders } from "../plan/image-folders.js";

/**
 * `from`'s output into `to`'s input; when either ends with a failure the other is stopped, so
 * that neither waits forever on a pipe nobody reads.
 */
export function joinPipe(from: RawProcess, to: RawProcess): void {
  from.stdout.pipe(to.stdin);
  void to.done.then((r) => {
    if (r.code !== 0) from.kill();
  });
  void from.done.then((r) => {
    if (r.code !== 0) to.kill();
  });
}

export interface NodeImage {
  readonly node: string;
  readonly id?: string;
  /** Set when the node could not be asked. */
  readonly error?: string;
}

/**
 * What an interrupted push left on the nodes it sent to, node by node: the image whole (the
 * source's ID) or under the name as before, never part of one: Docker's load untars the whole
 * archive to a temporary folder before it reads its manifest and tags (moby image/tarexport/
 * load.go), so a load cut short tags nothing, and its temporary folder goes with it.
 */
export function pushLeft(sourceId: string | undefined, after: readonly NodeImage[]): string {
  return after
    .map((n) =>
      n.error !== undefined
        ? `${n.node} could not be asked (${n.error})`
        : n.id === undefined
          ? `${n.node} has no image under the name (a load cut short leaves none)`
          : n.id === sourceId
            ? `${n.node} has the image (${shortId(n.id)})`
            : `${n.node} still has its other build (${shortId(n.id)}), not part of this one`,
    )
    .join("; ");
}

/** `sha256:0123…` as people read it: the first 12 hex digits. */
export const shortId = (id: string | undefined): string => (id === undefined ? "missing" : id.replace(/^sha256:/, "").slice(0, 12));

/** Where to push from: the first node (in cluster order, so the head first) that has the image. */
export const pushSource = (report: readonly NodeImage[]): string | undefined => report.find((r) => r.id !== undefined)?.node;

export async function imageReport(image: string, dockers: readonly Docker[]): Promise<NodeImage[]> {
  return Promise.all(
    dockers.map(async (d): Promise<NodeImage> => {
      try {
        const id = await d.imageId(image);
        return id === undefined ? { node: d.node } : { node: d.node, id };
      } catch (e) {
        return { node: d.node, error: e instanceof RemoteError ? `${e.message}: ${e.detail ?? ""}`.trim() : String(e) };
      }
    }),
  );
}

/** Builds `target` on `builder`, bases first where the builder lacks them. Returns what was built. */
export async function buildImage(target: ImageFolder, folders: readonly ImageFolder[], builder: Docker, note: (text: string) => void): Promise<ImageFolder[]> {
  const bases = new Set<string>();
  const seen = new Set<string>();
  const collect = async (f: ImageFolder): Promise<void> => {
    for (const base of fromImages(f.dockerfile)) {
      if (seen.has(base)) continue;
      seen.add(base);
      if ((await builder.imageId(base)) !== undefined) bases.add(base);
      const sub = folders.find((x) => x.tag === base);
      if (sub !== undefined) await collect(sub);
    }
  };
  await collect(target);
  const order = buildOrder(target, folders, bases, builder.node);
  if (!order.ok) throw new UserError(order.message, order.hint);
  for (const step of order.steps) {
    // A folder may stage files the build needs (the practice engine copies this machine's node).
    if (existsSync(path.join(step.path, "prepare.sh"))) {
      note(`preparing docker-images/${step.name} (prepare.sh) ...`);
      const prep = spawnLocal("bash", [path.join(step.path, "prepare.sh")]);
      prep.stdin.end();
      prep.stdout.resume();
      const r = await prep.done;
      if (r.code !== 0) throw new RemoteError("local", `docker-images/${step.name}/prepare.sh failed (exit ${r.code})`, r.stderr);
    }
    note(`building ${step.tag} from docker-images/${step.name} on ${builder.node} ...`);
    const tar = spawnLocal("tar", ["-C", step.path, "-c", "."]);
    tar.stdin.end();
    const build = builder.transport.spawn(["docker", "build", "--quiet", "--tag", step.tag, "-"]);
    joinPipe(tar, build);
    build.stdout.resume();
    const [t, b] = await Promise.all([tar.done, build.done]);
    if (t.code !== 0) throw new RemoteError("local", `packing docker-images/${step.name} failed (exit ${t.code})`, t.stderr);
    if (b.code !== 0) throw new RemoteError(builder.node, `docker build of ${step.tag} failed (exit ${b.code})`, b.stderr.split("\n").slice(-15).join("\n"));
  }
  return [...order.steps];
}


export interface PushResult {
  readonly image: string;
  readonly id: string;
  readonly source: string;
  readonly nodes: readonly PushedNode[];
  /** Layer files left out of the archive (every node sent it stored them already), as the filter on the source counted them. */
  readonly layers_not_sent?: number;
  readonly bytes_not_sent?: number;
  readonly seconds: number;
}

export interface PushedNode {
  readonly node: string;
  readonly action: "had" | "sent";
  readonly bytes: number;
  readonly before?: string;
  /** How it was sent: from another node over the fabric or management network, or through this machine. */
  readonly path?: TransferPath;
  /** The node it came from (node to node). */
  readonly from?: string;
  /** Why it went through this machine. */
  readonly why?: string;
}

/** How payload may move: node to node where `routes` say where each node listens, unless `relay` gives a reason not to. */
export interface DirectOptions {
  readonly routes?: ReadonlyMap<string, NodeRoute>;
  readonly relay?: string;
}

export interface PushOptions extends DirectOptions {
  /** The image's ID on the source and on every target, as imageReport found it just before: not asked again. */
  readonly known?: readonly NodeImage[];
}

/**
 * The relay: one `docker save` on the source, its bytes through this machine to every target's
 * `docker load` at once (the slowest sets the pace). `bytes` gets what each node was sent.
 */
/**
 * `docker load` that applies nothing but the image with ID $1: it tags every image the archive's
 * manifest names (moby/moby image/tarexport/load.go: one "Loaded image: NAME" line per RepoTag, or
 * "Loaded image ID: ID" when there is none), so an archive from anyone else could retag another
 * image on the node (ubuntu:22.04, another recipe's engine). Any name it set to another ID is
 * taken off again and the load fails, naming it. The hops' HMAC already keeps strangers out; this
 * keeps a wrong archive from leaving a wrong name behind, whoever sent it. A store kept by
 * containerd loads an image whose layers it cannot unpack and only says "Error unpacking image"
 * (moby daemon/containerd/image_exporter.go): that fails the load too, its names taken off.
 */
const LOAD_ONLY_SCRIPT = `want=$1
out=$(docker_api load) || { printf '%s\n' "$out" >&2; exit 1; }
printf '%s\n' "$out" >&2
bad= n=0
while IFS= read -r line; do
  case $line in
    "Loaded image ID: "*) id=\${line#"Loaded image ID: "}; t= ;;
    "Loaded image: "*) t=\${line#"Loaded image: "}; id=$(docker image inspect --format '{{.Id}}' -- "$t" 2>/dev/null) ;;
    *) continue ;;
  esac
  n=$((n + 1))
  if [ "$id" != "$want" ]; then
    bad="$bad \${t:-$id}"
    [ -n "$t" ] && docker image rm --no-prune -- "$t" >/dev/null 2>&1
  fi
done <<LOADED
$out
LOADED
case $out in *"Error unpacking image"*)
  printf '%s\n' "$out" | sed -n 's/^Loaded image: //p' | while IFS= read -r t; do docker image rm --no-prune -- "$t" >/dev/null 2>&1; done
  echo "docker load could not unpack the image (its store lacks a layer the archive left out?); its names were removed again" >&2
  exit 1 ;;
esac
[ -z "$bad" ] && [ "$n" -gt 0 ] && exit 0
echo "the archive loaded other images than $want:\${bad:- none}; their names were removed again" >&2
exit 1`;

/** The argv that loads an archive on a node (straight to Docker's socket where it may be: docker-api.ts) and keeps only the image with ID `id` (LOAD_ONLY_SCRIPT). */
export const loadOnly = (id: string): string[] => withDockerApi("sh", LOAD_ONLY_SCRIPT, [id]);

/** Returns what the source's save command wrote to stderr (the layer filter's count). */
async function relayImage(image: string, id: string, command: readonly string[], source: Docker, need: readonly Docker[], bytes: Map<string, number>, progress: TransferProgress, signal?: AbortSignal): Promise<string> {
  if (need.length === 0) return "";
  for (const t of need) bytes.set(t.node, 0);
  const save = source.transport.spawn(command);
  save.stdin.end();
  const loads = need.map((t) => ({ node: t.node, p: t.transport.spawn(loadOnly(id)), dead: false, waiting: false }));
  // The save goes at the pace of the slowest live load; a load that ends early stops holding it back.
  const maybeResume = (): void => {
    if (loads.every((l) => l.dead || !l.waiting)) save.stdout.resume();
  };
  for (const l of loads) {
    l.p.stdout.resume();
    void l.p.done.then(() => {
      l.dead = true;
      maybeResume();
    });
  }
  save.stdout.on("data", (chunk: Buffer) => {
    for (const l of loads) {
      if (l.dead) continue;
      bytes.set(l.node, (bytes.get(l.node) ?? 0) + chunk.length);
      progress.node(l.node, bytes.get(l.node) ?? 0, false, RELAY_DETAIL);
      if (!l.p.stdin.write(chunk)) {
        l.waiting = true;
        l.p.stdin.once("drain", () => {
          l.waiting = false;
          maybeResume();
        });
      }
    }
    if (loads.some((l) => !l.dead && l.waiting)) save.stdout.pause();
    if (loads.every((l) => l.dead)) save.kill();
  });
  save.stdout.on("end", () => {
    for (const l of loads) l.p.stdin.end();
  });
  // An interrupt stops the transfer where it is: a load cut short gets a truncated archive and
  // tags nothing, so no node is left with half an image under the name.
  const stop = (): void => {
    save.kill();
    for (const l of loads) l.p.kill();
  };
  signal?.addEventListener("abort", stop, { once: true });
  if (signal?.aborted) stop();
  const saved = await save.done;
  signal?.removeEventListener("abort", stop);
  if (signal?.aborted) {
    await Promise.all(loads.map((l) => l.p.done));
    checkInterrupted(signal, `the push of ${image} was stopped; no container was started`);
  }
  // Every load gone first: their errors (below) say more than the save's broken pipe.
  if (saved.code !== 0 && !loads.every((l) => l.dead)) {
    for (const l of loads) l.p.kill();
    throw new RemoteError(source.node, `docker save ${image} failed (exit ${saved.code})`, saved.stderr);
  }
  const results = await Promise.all(loads.map(async (l) => ({ node: l.node, r: await l.p.done })));
  for (const { node } of results) progress.node(node, bytes.get(node) ?? 0, true, RELAY_DETAIL);
  const failed = results.filter((x) => x.r.code !== 0);
  if (failed.length > 0) throw new RemoteError(failed.map((f) => f.node).join(", "), `docker load of ${image} failed`, failed.map((f) => `${f.node}: ${f.r.stderr.trim()}`).join("\n"));
  return saved.stderr;
}

const RELAY_DETAIL = "through this machine";

/** `p`, marked as handled: started early, awaited (and its failure thrown) only if it is needed. */
export function handled<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}

/** What one SSH round trip finds on each node: the hop's tools and the free space where `docker load` writes. */
const probeDocker = (d: Docker, layers: boolean): Promise<NodeProbe> =>
  execChecked(d.transport, ["sh", "-c", PROBE_SCRIPT, "sh", "docker", "", layers ? "layers" : ""], "checking the node before the push", 30_000).then((out) => parseProbe(d.node, out));

/**
 * The image's size, its layers (diff IDs) and each layer's size where `docker history` gives them
 * one to one (its rows are the config's history, oldest last; a row that made no layer shows 0):
 * what the free-space check needs once some layers stay behind.
 */
const IMAGE_FACTS_SCRIPT = `docker image inspect --format '{{.Size}} {{json .RootFS.Layers}}' -- "$1" && docker history --no-trunc --human=false --format 'size {{.Size}}' -- "$1"`;
function parseImageFacts(out: string): { size: number; layers: string[]; layerSizes?: number[] } {
  const [first = "", ...rest] = out.trim().split("\n");
  const [size = "", ...json] = first.trim().split(" ");
  const layers = diffIdsOf(json.join(" ")) ?? [];
  const sizes = rest.flatMap((l) => /^size (\d+)$/.exec(l.trim())?.[1] ?? []).map(Number).reverse().filter((n) => n > 0);
  return { size: Number(size), layers, ...(sizes.length === layers.length ? { layerSizes: sizes } : {}) };
}

/** The source's ID and every target's as the caller found them just before (PushOptions.known), when it found them all. */
function knownIds(source: Docker, targets: readonly Docker[], known: readonly NodeImage[] | undefined): { id: string; before: readonly NodeImage[] } | undefined {
  const knownId = known?.find((r) => r.node === source.node)?.id;
  const knownBefore = targets.flatMap((t) => known?.filter((r) => r.node === t.node && r.error === undefined) ?? []);
  return knownId !== undefined && knownBefore.length === targets.length ? { id: knownId, before: knownBefore } : undefined;
}

const lacking = (targets: readonly Docker[], id: string, before: readonly NodeImage[]): Docker[] => targets.filter((t) => before.find((b) => b.node === t.node)?.id !== id);

/** The source's ID and each target's (asked now unless known): refused when the source lacks the image or a target does not answer. */
async function askIds(image: string, source: Docker, targets: readonly Docker[], known: { id: string; before: readonly NodeImage[] } | undefined): Promise<{ id: string; before: readonly NodeImage[] }> {
  const [id, before] = known === undefined ? await Promise.all([source.imageId(image), imageReport(image, targets)]) : [known.id, known.before];
  if (id === undefined) throw new UserError(`image ${image} is not on ${source.node}, so it cannot be sent from there`, "build it first (launcher images build RECIPE), or name another source with --from");
  const unreachable = before.filter((b) => b.error !== undefined);
  if (unreachable.length > 0) throw new RemoteError(unreachable.map((u) => u.node).join(", "), "cannot push: the node does not answer", unreachable.map((u) => `${u.node}: ${u.error ?? ""}`).join("\n"));
  return { id, before };
}

/** The checks before the bytes, started at once, each awaited only if needed (handled). */
interface EarlyChecks {
  readonly source: Promise<NodeProbe | undefined>;
  readonly probes: ReadonlyMap<string, Promise<NodeProbe>>;
  readonly image: Promise<ReturnType<typeof parseImageFacts>>;
}

function startChecks(image: string, source: Docker, targets: readonly Docker[], routes: ReadonlyMap<string, NodeRoute>): EarlyChecks {
  return {
    // The source's too, also for the relay: its save goes through the layer filter only where perl
    // runs. A chain cannot go without it; the relay just sends every layer then.
    source: handled(routes.has(source.node) ? probeDocker(source, false) : probeDocker(source, false).catch(() => undefined)),
    probes: new Map(targets.map((t) => [t.node, handled(probeDocker(t, true))])),
    image: handled(execChecked(source.transport, ["sh", "-c", IMAGE_FACTS_SCRIPT, "sh", image], "reading the image's size and layers", 20_000).then(parseImageFacts)),
  };
}

/** How a target was sent the image: the path, the node it came from, why through this machine. */
interface How {
  readonly path: TransferPath;
  readonly from?: string;
  readonly why?: string;
}

/** One push under way, to the targets that lack the image (`need`). */
interface PushRun {
  readonly image: string;
  readonly id: string;
  readonly source: Docker;
  readonly need: readonly Docker[];
  readonly routes: ReadonlyMap<string, NodeRoute>;
  readonly direct: PushOptions;
  readonly progress: TransferProgress;
  readonly signal: AbortSignal | undefined;
  /** The source's whole save (dockerSave). */
  readonly wholeSave: readonly string[];
  /** What each node was sent. */
  readonly bytes: Map<string, number>;
  readonly how: Map<string, How>;
  /** Layer files the source's filter said it left out. */
  notSent?: { readonly files: number; readonly bytes: number };
  /** The source's hop started early, until the chain takes it over or it is stopped. */
  sender: StartedSource | undefined;
}

/** The free space each target needs: `docker load` unpacks the whole archive (what is sent, the stored layers left out) once before it stores it. */
function checkRoom(image: string, need: readonly Docker[], probes: readonly NodeProbe[], facts: ReturnType<typeof parseImageFacts>, skip: LayerSkip | undefined): void {
  const { size, layerSizes } = facts;
  // `docker load` unpacks the whole archive in its temporary folder (under Docker's root) before
  // it stores the layers (moby/moby image/tarexport/load.go, untar into os.MkdirTemp): twice what is sent.
  const stays = skip === undefined || layerSizes === undefined ? 0 : skip.dropped.reduce((sum, i) => sum + (layerSizes[i] ?? 0), 0);
  const sent = size - stays;
  checkSpace(
    probes,
    new Map(need.map((t) => [t.node, 2 * sent])),
    `image ${image} (${(sent / 1048576).toFixed(0)} MiB${stays > 0 ? ` to send of ${(size / 1048576).toFixed(0)} MiB: the rest is stored there already` : ""}, unpacked once to a temporary folder, then stored)`,
  );
}

/**
 * What the source's filter counted as left out, said once. Said from that count, not from the
 * plan: a Docker whose archive names its layers otherwise (an image store kept by containerd) gets
 * them all, and is not told otherwise.
 */
function heard(run: PushRun, layers: number, stderr: string): void {
  const out = leftOut(stderr);
  if (out === undefined || run.notSent !== undefined) return;
  run.notSent = out;
  run.progress.note?.(`  left out ${out.files} of the image's ${layers} layers (${(out.bytes / 1048576).toFixed(1)} MiB): every node stores them already`);
}

/** The relay (its own `save`) to the nodes of `list`, each marked with why. */
function relayed(run: PushRun, save: readonly string[], layers: number, list: readonly { node: string; why: string }[], branch = run.signal): Promise<void> {
  for (const r of list) {
    run.how.set(r.node, { path: "relay", why: r.why });
    // Said when it is news: not for --relay, nor where node to node was never possible.
    if (run.direct.routes !== undefined && run.direct.relay === undefined) run.progress.note?.(`  ${r.node.padEnd(10)} through this machine: ${r.why}`);
  }
  const names = list.map((r) => r.node);
  return relayImage(run.image, run.id, save, run.source, run.need.filter((t) => names.includes(t.node)), run.bytes, run.progress, branch).then((said) => heard(run, layers, said));
}

/** The chain to the planned nodes: those it could not reach, for the relay. */
async function chainImage(run: PushRun, plan: RoutePlan, skip: LayerSkip | undefined, layers: number, branch: AbortSignal): Promise<readonly { node: string; why: string }[]> {
  if (plan.direct.length === 0) return [];
  const { image, source } = run;
  const receivers = plan.direct.map((r) => ({ ...r, transport: (run.need.find((t) => t.node === r.node) as Docker).transport, sink: loadOnly(run.id), skip: 0 }));
  const filterArgs = skip === undefined ? [] : layerEntries(skip.names);
  // runChain owns the started hop from here: it ends it whatever happens.
  const started = run.sender;
  run.sender = undefined;
  const out = await runChain(
    started ?? { node: source.node, transport: source.transport, command: run.wholeSave, filter: TAR_FILTER_PERL },
    receivers,
    (node, n, done) => {
      run.bytes.set(node, n);
      const h = run.how.get(node);
      run.progress.node(node, n, done, h?.from === undefined ? undefined : `from ${h.from} over ${h.path}`);
    },
    { signal: branch, filterArgs },
  );
  checkInterrupted(branch, `the push of ${image} was stopped; no container was started`);
  heard(run, layers, out.sourceSaid);
  for (const d of out.delivered) run.how.set(d.node, { path: d.path, from: d.from });
  if (out.failed.length > 0) throw new RemoteError(out.failed.map((f) => f.node).join(", "), `sending ${image} node to node failed`, out.failed.map((f) => `${f.node}: ${f.why}`).join("\n"), "run the push again; --relay sends it through this machine instead");
  return out.unreached;
}

/** The bytes to every node of `run.need`: the checks' answers, the space, the plan, then the chain and the relay at once. */
async function send(run: PushRun, early: EarlyChecks): Promise<void> {
  const { image, source, need, direct } = run;
  const [sourceProbe, probes, facts] = await Promise.all([early.source, Promise.all(need.map((t) => early.probes.get(t.node) as Promise<NodeProbe>)), early.image]);
  // The layers every node sent the image already stores stay where they are (src/transfer/layers.ts),
  // on either path: each gets the same archive.
  const skip = pushSkip(facts.layers, sourceProbe, probes);
  checkRoom(image, need, probes, facts, skip);
  const plan = planRoutes(source.node, run.routes.has(source.node) ? sourceProbe : undefined, probes, run.routes, direct.relay ?? (direct.routes === undefined ? "node to node was not asked for" : undefined));
  if (plan.direct.length === 0) {
    // Every node goes through the relay, whose own save starts now: the early one would hold its
    // export (a whole copy of the image in Docker's root) until the relay ended.
    run.sender?.stop();
    run.sender = undefined;
  }
  const save = skip === undefined ? run.wholeSave : saveWithout(image, skip.names);
  const layers = facts.layers.length;
  // As planned: each node from the one before it (the outcome says where each really came from).
  for (const [i, r] of plan.direct.entries()) run.how.set(r.node, { path: r.path, from: plan.direct[i - 1]?.node ?? source.node });
  let unreached: readonly { node: string; why: string }[] = [];
  try {
    await together(run.signal, [
      async (branch) => {
        unreached = await chainImage(run, plan, skip, layers, branch);
      },
      (branch) => relayed(run, save, layers, plan.relay, branch),
    ]);
    await relayed(run, save, layers, unreached);
  } catch (e) {
    // A layer the probe saw may be gone by the load (an image prune meanwhile): the next push's
    // probe no longer sees it, and sends it.
    if (skip === undefined || !(e instanceof RemoteError)) throw e;
    throw new RemoteError(e.node, e.message, e.detail, `${e.hint === undefined ? "" : `${e.hint}; `}the archive left out ${skip.layers} layers every node stored: if one was removed meanwhile (docker image prune), running the push again sends it`);
  }
}

function pushedNode(run: PushRun, t: Docker, before: readonly NodeImage[]): PushedNode {
  const had = before.find((b) => b.node === t.node)?.id;
  const sent = run.bytes.has(t.node);
  const h = run.how.get(t.node);
  return {
    node: t.node,
    action: sent ? "sent" : "had",
    bytes: run.bytes.get(t.node) ?? 0,
    ...(had === undefined || !sent ? {} : { before: had }),
    ...(h === undefined || !sent ? {} : { path: h.path, ...(h.from === undefined ? {} : { from: h.from }), ...(h.why === undefined ? {} : { why: h.why }) }),
  };
}

/**
 * Sends `image` from `source` to every target that lacks it or holds another ID, then checks every
 * node's ID against the source's. With `direct.routes`, node to node: a chain from the source
 * through every target (runChain), each `docker load` fed while the bytes pass on; a target the
 * chain cannot serve (no perl there, an address no other node reaches) gets the relay, and why is
 * said. The ID is the digest of the image's config, and `docker load` refuses a layer whose
 * content does not match the config's diff ID (moby/moby image/tarexport/load.go, "invalid diffID
 * for layer"): the same ID is the same image, bit for bit, whatever carried it.
 */
export async function pushImage(image: string, source: Docker, targets: readonly Docker[], progress: TransferProgress, signal?: AbortSignal, direct: PushOptions = {}): Promise<PushResult> {
  const started = Date.now();
  const routes = direct.routes ?? new Map<string, NodeRoute>();
  const known = knownIds(source, targets, direct.known);
  // Node to node where it may be, the source's hop starts first, as soon as some node is known to
  // lack the image: Docker's own image store writes its whole export (every layer, to a temporary
  // folder under its root) before `docker save` gives the first byte (moby image/tarexport/save.go:
  // saveLayer for each layer, then archive.Tar of the folder), and that now runs while the checks
  // below do (a store kept by containerd streams as it goes: there the early start gains little).
  // The layers to leave out are told to its filter once known. The price, when the push does not
  // go ahead (a check refuses it) or goes all through the relay: the start is stopped, but Docker's
  // save takes no cancellation, so the source still writes that copy of the image in its Docker
  // root, and removes it, before the save ends on its closed pipe.
  // The source's whole save: the early start and the chain's fallback run it through the layer
  // filter; the relay runs it when no layer is left out (else saveWithout).
  const wholeSave = dockerSave(image);
  const startEarly = (need: readonly Docker[]): StartedSource | undefined =>
    need.length > 0 && direct.relay === undefined && routes.has(source.node) && need.some((t) => routes.has(t.node)) ? startSource({ node: source.node, transport: source.transport, command: wholeSave, filter: TAR_FILTER_PERL }) : undefined;
  const sender = known === undefined ? undefined : startEarly(lacking(targets, known.id, known.before));
  // The checks before the bytes (hop tools, free space, the image's size) are asked together with
  // which nodes lack the image: one round trip before the bytes, not two. A node that has it was
  // asked for nothing it needs; a failed probe counts only for a node that is sent the image.
  const early = startChecks(image, source, targets, routes);
  const { id, before } = await askIds(image, source, targets, known).catch((e: unknown) => {
    sender?.stop();
    throw e;
  });
  const need = lacking(targets, id, before);
  const run: PushRun = { image, id, source, need, routes, direct, progress, signal, wholeSave, bytes: new Map(), how: new Map(), sender: sender ?? startEarly(need) };
  try {
    if (need.length > 0) await send(run, early);
  } finally {
    run.sender?.stop();
  }
  const after = await imageReport(image, targets);
  const wrong = after.filter((a) => a.id !== id);
  if (wrong.length > 0) {
    throw new RemoteError(wrong.map((w) => w.node).join(", "), `after the push, ${image} differs from ${source.node}'s ${shortId(id)}`, wrong.map((w) => `${w.node}: ${shortId(w.id)}`).join("\n"));
  }
  return {
    image,
    id,
    source: source.node,
    nodes: targets.map((t) => pushedNode(run, t, before)),
    ...(run.notSent === undefined ? {} : { layers_not_sent: run.notSent.files, bytes_not_sent: run.notSent.bytes }),
    seconds: (Date.now() - started) / 1000,
  };
}

/**
 * Before a boot: every node of the plan gets the image the head has (or the first node that has
 * it), so no rank starts with another build or none. Nothing to do costs one `inspect` per node.
 */
export async function ensureImage(image: string, nodes: readonly Docker[], note: (text: string) => void, signal: AbortSignal, routes?: ReadonlyMap<string, NodeRoute>): Promise<PushResult | undefined> {
  const report = await abortable(imageReport(image, nodes), signal, "before the image push; no container was started");
  // A node that does not answer is preflight's to report, with the others' problems.
  if (report.some((r) => r.error !== undefined)) return undefined;
  const ids = new Set(report.map((r) => r.id));
  if (ids.size === 1 && !ids.has(undefined)) return undefined;
  const from = pushSource(report);
  const source = nodes.find((n) => n.node === from);
  if (source === undefined) return undefined;
  const lacking = report.filter((r) => r.id !== report.find((x) => x.node === from)?.id).map((r) => r.node);
  note(`image ${image}: sending it from ${source.node} to ${lacking.join(", ")} (--no-push refuses instead) ...`);
  return pushImage(image, source, nodes.filter((n) => n !== source), transferProgress(note, Date.now), signal, { known: report, ...(routes === undefined ? {} : { routes }) });
}
