import { randomBytes } from "node:crypto";
import { connect } from "node:net";
import { RemoteError, UserError } from "../config/errors.js";
import type { NodeSpec, Plan } from "../plan/plan.js";
import type { Recipe } from "../recipe/recipe.js";
import { LIST_SCRIPT, type ContainerInfo, type Docker } from "../remote/docker.js";
import { DEPLOYMENT_LABEL } from "../contract/deployment.js";
import { unreachable, type ExecResult } from "../remote/transport.js";
import { dockerOf, type ClusterSession } from "../nodes/session.js";
import { weightsReport, type NodeWeights } from "../transfer/models.js";
import { shortId } from "../transfer/images.js";
import { headReadsWeights, weightReaders, weightsLocation } from "../plan/weights.js";
import { abortable } from "../config/abort.js";
import { judgeExisting } from "../nodes/existing.js";
import { clusterStatus, type DeploymentStatus } from "../nodes/status.js";
import { checkImage, type ArgsJudge, type ImageCheck } from "../nodes/image-check.js";
import { fitDeployment, fitProblems, fitText, type FitReport } from "../memory/fit.js";
import { parseMeminfo, type Meminfo } from "../memory/meminfo.js";
import { floorProblem, nodeFloorGiB } from "../memory/memory-watch.js";
import { traced } from "../remote/trace.js";
import { adapterOf } from "../engine/registry.js";
import { listeningPorts } from "./listening.js";
import { fabricIpProblems } from "./fabric-holds.js";

// Read-only mounts are data that must exist; the others are caches, created on first boot.
const MOUNT_SCRIPT = `missing=""
for p in "$@"; do
  case "$p" in
    ro:*) [ -e "\${p#ro:}" ] || missing="$missing \${p#ro:}" ;;
    rw:*) mkdir -p "\${p#rw:}" 2>/dev/null || [ -d "\${p#rw:}" ] || missing="$missing \${p#rw:}" ;;
  esac
done
[ -z "$missing" ] || { echo "$missing"; exit 3; }`;

function portInUse(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 1500 });
    const done = (used: boolean): void => {
      socket.destroy();
      resolve(used);
    };
    socket.once("connect", () => done(true));
    socket.once("timeout", () => done(false));
    socket.once("error", () => done(false));
  });
}

/**
 * What to do about an image missing on `missing` (`everywhere`: on every node of the plan, so
 * there is nothing to push from): build it from its docker-images/ folder, or, for an image
 * launcher does not build (a public one), pull it on one node, since launcher never pulls.
 */
export function missingImage(recipe: Pick<Recipe, "id" | "docker_image" | "docker_image_dir">, missing: readonly string[], everywhere: boolean): string {
  const head = `image ${recipe.docker_image} is missing on ${missing.join(", ")}`;
  if (!everywhere) return `${head}: launcher images push ${recipe.id} sends it (up does that itself without --no-push)`;
  return recipe.docker_image_dir === undefined
    ? `${head}: launcher does not pull images: run docker pull ${recipe.docker_image} on one node, then up sends it to the others (or launcher images push ${recipe.id})`
    : `${head}: build it (launcher images build ${recipe.id}, from docker-images/${recipe.docker_image_dir}/), then launcher images push ${recipe.id}`;
}

/**
 * Checks every node in parallel before any container starts; every problem names its node.
 * Deployments in `replacing` are about to be stopped for this one: their nodes count as free.
 * An interrupt ends it at once (it starts nothing that would need undoing). `readings`: what
 * readPlanNodes read of the nodes (up asks it alongside its look for the same deployment); none:
 * read now, and those reads ended before it settles, however it ends.
 */
export function preflight(plan: Plan, session: ClusterSession, signal: AbortSignal, replacing: ReadonlySet<string> = new Set(), readings?: Promise<PlanReadings>, judge?: ArgsJudge): Promise<PreflightResult> {
  const own = readings === undefined ? readPlanNodes(plan, session, signal) : undefined;
  const work = (readings ?? (own as PendingReadings).all).then((read) => checkNodes(plan, session, replacing, signal, read, judge));
  const checked = abortable(work, signal, `during the preflight of ${plan.deployment}; no container was started`);
  return own === undefined ? checked : checked.finally(own.end);
}

/** What the image check read, and the memory fit of every node (its arithmetic printed by up). */
export type PreflightResult = Omit<ImageCheck, "problems"> & { readonly fit?: FitReport };

/** One node's answers to the preflight's questions, or why it gave none. */
export type NodeReading =
  | { readonly node: string; readonly problem: string }
  | { readonly node: string; readonly imageId: string | undefined; readonly containers: readonly ContainerInfo[]; readonly mounts: ExecResult; readonly meminfo: string; readonly links?: ExecResult; readonly addrs?: ExecResult; readonly tcp?: ExecResult };

/** What the preflight reads of the plan's nodes: each node's answers, and the weights on those that answered. */
export interface PlanReadings {
  readonly nodes: ReadonlyMap<string, NodeReading>;
  readonly weights: readonly NodeWeights[];
}

/** readPlanNodes under way: the nodes' answers (what the push decides on) come before the weights. */
export interface PendingReadings {
  readonly nodes: Promise<ReadonlyMap<string, NodeReading>>;
  readonly all: Promise<PlanReadings>;
  /**
   * Stops what is still being asked: each read's signal aborts, which stops its local ssh (the
   * node's side ends with its connection). Resolves once every read has returned (at once when all
   * was answered); whoever holds the reads calls it before the nodes' claims are given back.
   */
  readonly end: () => Promise<void>;
}

// Every question of the preflight to one node in ONE SSH round trip, its parts run at once on the
// node: the image's ID, the mount paths (MOUNT_SCRIPT), /proc/meminfo and the launcher containers
// (LIST_SCRIPT: its `docker ps` failing is the Docker daemon not answering, so no `docker version`
// is needed). The listing holds the containers' env (engine keys, tokens): it goes straight to
// stdout, never to a file on the node, which a reader that hangs up (SIGPIPE kills dash before any
// EXIT trap) would leave behind. The other parts run alongside it on the left of a pipe, copied
// out after the listing: their few KiB fit in the pipe (64 KiB since Linux 2.6.11: pipe(7)), and
// more would only make them wait for the copy, never lose or mix a byte. Each part's stdout
// follows a line "NONCE NAME" and ends with "NONCE err CODE", then its stderr on one line; the
// nonce is random, so no output can forge a marker (parsed by readSections).
const PART_COMMANDS = {
  containers: `sh -c "$list" sh "$label"`,
  image: `docker image inspect --format '{{.Id}}' -- "$image"`,
  mounts: `sh -c "$mounts" sh "$@"`,
  meminfo: "cat /proc/meminfo",
  // The node's interfaces and IPv4 addresses, as doctor reads them (fabric-holds.ts).
  links: "ip -o link show",
  addrs: "ip -o -4 addr show",
  // The node's TCP sockets (./listening.ts): a worker's port the engine binds (workersBindApiPort).
  tcp: "sh -c 'cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; true'",
} as const;
type PartName = keyof typeof PART_COMMANDS;
const PARTS = Object.keys(PART_COMMANDS) as PartName[];
// Read where the node can say them; a node without them is not judged on them (fabric-holds.ts).
const OPTIONAL_PARTS: readonly PartName[] = ["links", "addrs", "tcp"];
const partLine = (name: PartName): string => `part ${name} ${PART_COMMANDS[name]}`;
// `3>&1` hands the part's stdout to the command while $(...) takes its stderr.
export const READ_SCRIPT = `nonce=$1 image=$2 label=$3 list=$4 mounts=$5; shift 5
part() {
  printf '%s %s\\n' "$nonce" "$1"
  shift
  { err=$("$@" 2>&1 >&3 3>&-); } 3>&1
  printf '\\n%s err %s\\n%s\\n' "$nonce" "$?" "$err"
}
{ ${PARTS.filter((p) => p !== "containers").map(partLine).join("; ")}; } | { ${partLine("containers")}; cat; }`;
const READ_TIMEOUT_MS = 20_000;

/**
 * The parts of READ_SCRIPT's output by name, each as the command's own result (its stderr without
 * trailing newlines). A part cut short (no end marker) is absent. Pure: tested with outputs that
 * forge a marker without the nonce.
 */
export function readSections(stdout: string, nonce: string): Map<string, ExecResult> {
  const parts = new Map<string, ExecResult>();
  let at: { name: string; code: number | undefined; out: string[]; err: string[] } | undefined;
  const end = (): void => {
    if (at?.code !== undefined) parts.set(at.name, { code: at.code, stdout: at.out.join("\n"), stderr: at.err.join("\n") });
  };
  // The output's last newline ends the last part's stderr line (the script's own printf).
  for (const line of stdout.replace(/\n$/, "").split("\n")) {
    const head = line.startsWith(`${nonce} `) ? line.slice(nonce.length + 1).split(" ") : undefined;
    if (head !== undefined && head.length === 1 && (PARTS as readonly string[]).includes(head[0] ?? "")) {
      end();
      at = { name: head[0] ?? "", code: undefined, out: [], err: [] };
    } else if (head !== undefined && head.length === 2 && head[0] === "err" && /^\d+$/.test(head[1] ?? "") && at !== undefined && at.code === undefined) at.code = Number(head[1]);
    else if (at !== undefined) (at.code === undefined ? at.out : at.err).push(line);
  }
  end();
  return parts;
}

/** One node's answers, in one round trip (READ_SCRIPT); a node that cannot answer says why, naming itself. */
async function readNode(spec: NodeSpec, docker: Docker, signal: AbortSignal): Promise<NodeReading> {
  const nonce = randomBytes(16).toString("hex");
  const mounts = spec.mounts.map((m) => `${m.read_only ? "ro" : "rw"}:${m.host}`);
  const r = await docker.transport.exec(["sh", "-c", READ_SCRIPT, "sh", nonce, spec.image, DEPLOYMENT_LABEL, LIST_SCRIPT, MOUNT_SCRIPT, ...mounts], { timeoutMs: READ_TIMEOUT_MS, signal });
  const who = `${spec.node} (${spec.host})`;
  const lost = unreachable(docker.transport, r);
  if (lost !== undefined) return { node: spec.node, problem: `${who}: SSH unreachable: ${lastTwo(lost.detail ?? "")}` };
  const parts = readSections(r.stdout, nonce);
  const missing = PARTS.filter((p) => !parts.has(p) && !OPTIONAL_PARTS.includes(p));
  // Only stderr is quoted: stdout may end inside the listing, which holds the containers' env.
  const said = r.stderr.trim() === "" ? "" : `: ${lastTwo(r.stderr.trim())}`;
  if (missing.length > 0) return { node: spec.node, problem: `${who}: the preflight's reads ended without ${missing.join(", ")} (exit ${r.code})${said}` };
  const part = (name: PartName): ExecResult => parts.get(name) as ExecResult;
  let containers: ContainerInfo[];
  try {
    containers = docker.listing(part("containers"));
  } catch (e) {
    // A RemoteError is docker's own failure (SshDocker.listing): the daemon did not answer.
    // Anything else is output that is no listing; its parser's words would quote it (and its env).
    const problem = e instanceof RemoteError ? `Docker unreachable: ${lastTwo(e.detail ?? e.message)}` : "its container listing (docker inspect) could not be read as JSON";
    return { node: spec.node, problem: `${who}: ${problem}` };
  }
  const image = part("image");
  return { node: spec.node, imageId: image.code === 0 ? image.stdout.trim() : undefined, containers, mounts: part("mounts"), meminfo: part("meminfo").stdout, ...optionalParts(parts) };
}

const optionalParts = (parts: ReadonlyMap<string, ExecResult>): { links?: ExecResult; addrs?: ExecResult; tcp?: ExecResult } => {
  const links = parts.get("links");
  const addrs = parts.get("addrs");
  const tcp = parts.get("tcp");
  return { ...(links === undefined ? {} : { links }), ...(addrs === undefined ? {} : { addrs }), ...(tcp === undefined ? {} : { tcp }) };
};

const lastTwo = (text: string): string => text.split("\n").slice(-2).join(" ").trim();

/**
 * Worker nodes where something already listens on the deployment's API port, which the engine's
 * rank there binds too (workersBindApiPort): it would fail after its weights load. A node a
 * replaced deployment frees, or another deployment holds (reported as held), is not judged here.
 */
export function workerPortProblems(plan: Plan, read: PlanReadings, freedFirst: ReadonlySet<string>, held: ReadonlyMap<string, ReadonlySet<string>>): string[] {
  return plan.nodes.slice(1).flatMap((spec) => {
    const r = read.nodes.get(spec.node);
    if (r === undefined || "problem" in r || r.tcp === undefined || freedFirst.has(spec.node) || [...held.values()].some((on) => on.has(spec.node))) return [];
    return listeningPorts(r.tcp.stdout).has(plan.api_port) ? [`${spec.node}: port ${plan.api_port} is already in use there, and the engine's rank on it listens on that port too (its health check): free it or pass --port`] : [];
  });
}

/**
 * What readPlanNodes asks of the plan's nodes, as one key: two plans of one key are read alike
 * (of the session it reads the nodes' weights folders, which the fabric probe leaves as they are).
 */
export const readsAsked = (plan: Plan): string => JSON.stringify([plan.recipe, plan.nodes.map((n) => [n.node, n.host, n.image, n.mounts])]);

/**
 * Reads every node of the plan at once, one round trip each, and the weights on them alongside (a
 * round trip of its own, models.ts's). Asked only while the nodes' claims are held (up's use case
 * asks it once it holds them, while the fabric probe runs; up, alongside its look for the same
 * deployment): MOUNT_SCRIPT creates the missing cache folders, and what the node holds decides the fit.
 * The whole is one "node reads" span of the trace.
 */
export function readPlanNodes(plan: Plan, session: ClusterSession, asked: AbortSignal): PendingReadings {
  const stop = new AbortController();
  const signal = AbortSignal.any([asked, stop.signal]);
  // The nodes that read the model's files (all, or the head alone: weightReaders), in rank order.
  const all = weightReaders(plan.recipe, plan.nodes.flatMap((s) => session.cluster.nodes.filter((n) => n.name === s.node)));
  const located = all.every((n) => weightsLocation(plan.recipe, n) !== undefined);
  // Asked of every node at once; kept only when every node answered (else asked again of those that did).
  const early = located ? traced("weights report", undefined, () => weightsReport(plan.recipe, session, all, signal)) : undefined;
  early?.catch(() => undefined);
  const nodes = Promise.all(plan.nodes.map((spec) => readNode(spec, dockerOf(session, spec.node), signal))).then((read) => new Map(read.map((r) => [r.node, r])));
  const withWeights = async (answers: ReadonlyMap<string, NodeReading>): Promise<PlanReadings> => {
    const answered = all.filter((n) => { const r = answers.get(n.name); return r !== undefined && !("problem" in r); });
    // The snapshot's size on each node is the weights' part of the memory fit.
    const weights = !located ? [] : answered.length === all.length && early !== undefined ? await early : await traced("weights report", undefined, () => weightsReport(plan.recipe, session, answered, signal));
    return { nodes: answers, weights };
  };
  const whole = traced("node reads", undefined, () => nodes.then(withWeights));
  nodes.catch(() => undefined);
  whole.catch(() => undefined);
  const end = async (): Promise<void> => {
    stop.abort();
    // The weights report asked alongside may outlast a node read that failed.
    await Promise.allSettled([whole, early]);
  };
  return { nodes, all: whole, end };
}

/**
 * Whether what the nodes hold of the image leaves anything for the push (ensureImage) to do: every
 * node answered and not all hold one same ID. A node that did not answer is the preflight's to report.
 */
export function imageUnsettled(nodes: ReadonlyMap<string, NodeReading>): boolean {
  const ids = new Set<string | undefined>();
  for (const r of nodes.values()) {
    if ("problem" in r) return false;
    ids.add(r.imageId);
  }
  return ids.size > 1 || ids.has(undefined);
}

/** What the plan's nodes answered, sorted for the checks: each node's image, memory and what runs there. */
interface NodeFacts {
  readonly problems: string[];
  /** Each node that answered, with the image ID it holds (undefined: none). */
  readonly imageIds: Map<string, string | undefined>;
  /** Containers of this very deployment (another launcher started it since `up` looked). */
  readonly existing: ContainerInfo[];
  /** Other deployments running on the plan's nodes, with those nodes. */
  readonly held: Map<string, Set<string>>;
  readonly meminfo: Map<string, Meminfo>;
  /** Nodes a deployment this one replaces runs on: freed before the start. */
  readonly freedFirst: Set<string>;
  headReplaced: boolean;
}

function nodeFacts(plan: Plan, session: ClusterSession, replacing: ReadonlySet<string>, read: PlanReadings): NodeFacts {
  const facts: NodeFacts = { problems: [], imageIds: new Map(), existing: [], held: new Map(), meminfo: new Map(), freedFirst: new Set(), headReplaced: false };
  const { problems, imageIds, existing, held, meminfo, freedFirst } = facts;
  for (const spec of plan.nodes) {
    const reading = read.nodes.get(spec.node);
    if (reading === undefined) continue;
    if ("problem" in reading) {
      problems.push(reading.problem);
      continue;
    }
    const { imageId: id, containers, mounts, meminfo: mem } = reading;
    const parsed = parseMeminfo(mem);
    if (parsed.ok) meminfo.set(spec.node, parsed.meminfo);
    const floor = parsed.ok ? floorProblem(spec.node, nodeFloorGiB(session.cluster, spec.node), parsed.meminfo.totalKiB) : undefined;
    if (floor !== undefined) problems.push(floor);
    imageIds.set(spec.node, id);
    if (mounts.code !== 0) problems.push(`${spec.node}: mount paths missing on the node:${mounts.stdout.trim() ? ` ${mounts.stdout.trim()}` : ` ${mounts.stderr.trim()}`}`);
    for (const c of containers) {
      const name = c.labels[DEPLOYMENT_LABEL] ?? "?";
      if (replacing.has(name)) {
        facts.headReplaced ||= spec.rank === 0;
        freedFirst.add(spec.node);
      }
      else if (name === plan.deployment) {
        // `up` refused an existing one before; this one appeared since (another launcher).
        existing.push(c);
        problems.push(`${spec.node}: deployment ${name} already has a container here (${c.name}, ${c.state}): pick another name (--name OTHER) or stop it (launcher down ${name})`);
      }
      else if (c.running) (held.get(name) ?? held.set(name, new Set()).get(name))?.add(spec.node);
    }
  }
  return facts;
}

async function checkNodes(plan: Plan, session: ClusterSession, replacing: ReadonlySet<string>, signal: AbortSignal, read: PlanReadings, judge?: ArgsJudge): Promise<PreflightResult> {
  const { problems, imageIds, existing, held, meminfo, freedFirst, headReplaced } = nodeFacts(plan, session, replacing, read);
  const missing = plan.nodes.filter((n) => imageIds.has(n.node) && imageIds.get(n.node) === undefined).map((n) => n.node);
  const ids = new Set([...imageIds.values()].filter((v): v is string => v !== undefined));
  const head = plan.nodes[0];
  // The image as the engine needs it (entrypoint, version, its own parser judging the args), read
  // on the head once every node is known to hold the same one; before the fit, which takes the
  // engine's memory default from that parser.
  let image: ImageCheck = { problems: [] };
  const [onlyId] = ids;
  if (head !== undefined && ids.size === 1 && missing.length === 0 && onlyId !== undefined) {
    image = await traced("image contract", head.node, () => checkImage(plan, dockerOf(session, head.node), onlyId, session.images, signal, judge));
    problems.push(...image.problems);
  }
  if (adapterOf(plan.recipe.engine)?.headAwaitsWorkersPort === true) {
    const workers = plan.nodes.slice(1).map((n) => n.node);
    problems.push(...fabricIpProblems(workers, session.cluster.nodes, (node) => {
      const r = read.nodes.get(node);
      return r === undefined || "problem" in r || r.links === undefined || r.addrs === undefined ? undefined : { links: r.links, addrs: r.addrs };
    }));
  }
  if (adapterOf(plan.recipe.engine)?.workersBindApiPort === true) problems.push(...workerPortProblems(plan, read, freedFirst, held));
  const planNodes = session.cluster.nodes.filter((n) => plan.nodes.some((s) => s.node === n.name) && imageIds.has(n.name));
  const weights = read.weights;
  // With HF_HUB_OFFLINE=1 the engine cannot fetch what is missing: find out now, not at minute 20.
  if (planNodes.some((n) => weightsLocation(plan.recipe, n)?.offline)) {
    for (const w of weights) {
      if (!w.present) problems.push(`${w.node}: model ${plan.recipe.model} is not in its Hugging Face cache (looked in ${w.path}: ${w.reason ?? "?"}); HF_HUB_OFFLINE=1 forbids a download: launcher models sync ${plan.recipe.id}`);
    }
  }
  const fit = fitDeployment(
    plan.recipe,
    plan.nodes.filter((n) => imageIds.has(n.node)).map((n) => {
      const mem = meminfo.get(n.node);
      // Where the head alone reads the files, its size is every node's share of them.
      const bytes = weights.find((w) => w.node === (headReadsWeights(plan.recipe) ? (head?.node ?? n.node) : n.node))?.bytes;
      const others = [...held].filter(([, on]) => on.has(n.node)).map(([name]) => name);
      // A deployment this one replaces frees its memory before the start: `up` checks again then.
      const gone = freedFirst.has(n.node);
      return { node: n.node, ...(mem === undefined || gone ? {} : { meminfo: mem }), ...(bytes === undefined ? {} : { weightsBytes: bytes }), deployments: others };
    }),
    image.judged?.defaultUtilization,
  );
  const fitted = fitProblems(fit);
  if (fitted.errors.length > 0) problems.push(...fitted.errors, `the memory fit, node by node:\n${fitText(fit).split("\n").map((l) => `    ${l}`).join("\n")}`);
  const rankOrder = plan.nodes.map((n) => n.node);
  for (const [name, nodes] of held) {
    const inOrder = rankOrder.filter((n) => nodes.has(n));
    problems.push(`${inOrder.join(", ")} held by deployment ${name}: stop it first (launcher down ${name})`);
  }
  if (missing.length > 0) problems.push(missingImage(plan.recipe, missing, missing.length === plan.nodes.length));
  if (ids.size > 1) {
    problems.push(`image ${plan.recipe.docker_image} differs between nodes: ${[...imageIds].map(([n, id]) => `${n} ${shortId(id)}`).join(", ")}; every rank needs the same image ID: launcher images push ${plan.recipe.id}`);
  }
  // A port held by one of our own deployments is already reported above.
  if (head !== undefined && existing.length === 0 && held.size === 0 && !headReplaced) {
    const host = new URL(plan.endpoint).hostname;
    if (await traced("API port free", undefined, () => portInUse(host, plan.api_port))) problems.push(`${head.node}: API port ${plan.api_port} is already in use on ${host}: free it or pass --port`);
  }
  if (problems.length > 0) {
    throw new UserError(`preflight failed for ${plan.deployment}; no container was started:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  }
  const { problems: _, ...said } = image;
  return { ...said, fit };
}

// Documentation/admin-guide/sysctl/vm.rst (torvalds/linux), drop_caches: writing 3 frees the clean
// page cache and the reclaimable slab (dentries, inodes); dirty pages are not freed, so `sync`
// first. Only root may write it: as another user, `sudo -n` (never a password prompt over SSH).
const DROP_CACHES_SCRIPT = `sync
if [ "$(id -u)" = 0 ]; then echo 3 > /proc/sys/vm/drop_caches && { echo root; exit 0; }; echo failed; exit 0; fi
if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo -n sh -c 'echo 3 > /proc/sys/vm/drop_caches' && { echo sudo; exit 0; }; echo failed; exit 0; fi
echo denied`;

/**
 * `up --drop-caches`: frees the page cache on every node of the plan, in parallel, before the fit
 * check reads their memory. Returns one line per node: done (as root or with sudo), or a warning
 * saying why not, so that the user knows the cache still counts.
 */
export async function dropCaches(plan: Plan, session: ClusterSession, signal: AbortSignal): Promise<string[]> {
  const run = Promise.all(
    plan.nodes.map(async (spec) => {
      const r = await dockerOf(session, spec.node).transport.exec(["sh", "-c", DROP_CACHES_SCRIPT], { timeoutMs: 120_000, signal });
      const how = r.stdout.trim();
      if (r.code === 0 && (how === "root" || how === "sudo")) return `${spec.node}: page cache dropped (${how === "root" ? "as root" : "with sudo"})`;
      if (how === "denied") return `warning: ${spec.node}: page cache not dropped: the SSH user is not root and sudo asks for a password (or is missing); run "sync; echo 3 > /proc/sys/vm/drop_caches" there as root, or allow sudo without a password`;
      return `warning: ${spec.node}: page cache not dropped: writing /proc/sys/vm/drop_caches failed${r.stderr.trim() ? ` (${r.stderr.trim().split("\n").slice(-1)[0] ?? ""})` : ""}`;
    }),
  );
  return abortable(run, signal, `while dropping the page cache before ${plan.deployment}; no container was started`);
}

/**
 * A deployment name is unique across the cluster: looks on EVERY node (not only the plan's) for
 * containers of this name. Returns the deployment when the very same one already serves; refuses
 * any other (another recipe, port, nodes or lane, or one that does not serve), before anything
 * is pushed or started. A node that does not answer cannot be checked: `note` says so.
 */
export async function sameNameOnCluster(plan: Plan, session: ClusterSession, signal: AbortSignal, note: (text: string) => void): Promise<DeploymentStatus | undefined> {
  const { deployments, unreachable } = await abortable(clusterStatus(session, new Date()), signal, `while looking for ${plan.deployment} on the cluster; no container was started`);
  const found = deployments.find((d) => d.deployment === plan.deployment);
  if (found === undefined) {
    if (unreachable.length > 0) note(`warning: ${unreachable.join(", ")} did not answer: cannot tell whether a deployment ${plan.deployment} runs there`);
    return undefined;
  }
  const verdict = judgeExisting(plan, found);
  if (!verdict.same) throw new UserError(verdict.message, verdict.hint);
  return found;
}
