/**
 * A cluster of in-memory nodes for unit tests that run launcher's real deploy code (`up()`,
 * removal, status) without SSH or Docker.
 *
 * Usage:
 *   const fc = await FakeCluster.start({ nodes: 4 });            // n1..n4 on 127.0.0.1..4, one free API port
 *   try {
 *     const plan = fc.plan(RECIPE_TOML, { nodes: ["n1", "n2"] }); // planDeployment, for real
 *     const r = await fc.up(plan);                               // up() over fc.session: ready
 *     fc.containers();   // ["n1:launcher-r-r0:running", "n2:launcher-r-r1:running"], like the rig's launcherContainers
 *     fc.notes;          // what up said (progress notes), in order
 *     fc.node("n1").calls / .removed / .asked("run")             // what each node was asked
 *   } finally { await fc.close(); }
 *
 * What a container does once run is `fc.script(container, node)`: by default `serve` (the head's
 * engine listens on its endpoint and the head logs the API line; workers log their rendezvous).
 * Replace it per test, e.g. `fc.script = (c, n) => n.say(c.name, ...HEAD_WAITING)` for a boot that
 * hangs; `fc.serve(c, n)` is the default to call from a script. A node's memory is
 * `node.setMemory(totalGiB, availableGiB)` or the `meminfo` option; its image is the `image`
 * option (ID, ENTRYPOINT, version). `fc.place(plan)` puts a plan's containers on its nodes as if
 * another launcher had run them (labelled with a boot id), without `up`.
 * Every fake node answers the scripts launcher runs on a node by their exported constants
 * (preflight's READ_SCRIPT, LIST_SCRIPT, the memory guard's SAMPLER_SCRIPT); anything else exits
 * 127, recorded in `node.calls`.
 */
import assert from "node:assert/strict";
import { parseCluster } from "../../src/cluster/parse.js";
import type { Cluster } from "../../src/cluster/cluster.js";
import { encodeLabels, LABELS } from "../../src/contract/deployment.js";
import { up, type UpOptions, type UpResult } from "../../src/boot/up.js";
import { stampBoot } from "../../src/boot/boot.js";
import type { ClusterSession } from "../../src/nodes/session.js";
import type { UpHost } from "../../src/app/up-use-case.js";
import type { StateStore } from "../../src/store/store.js";
import { planDeployment, type Plan, type PlanOptions } from "../../src/plan/plan.js";
import type { Progress } from "../../src/nodes/progress.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import type { ContainerInfo } from "../../src/remote/docker.js";
import { memorySource } from "./memory-source.js";
import { freePort, startFakeEngine, type FakeEngine } from "./fake-engine.js";
import { FakeNode, type FakeImage } from "./fake-node.js";

/** A recipe of two ranks (mp), image img:local, served as "served": memory-source.ts's BASE. */
export { BASE as RECIPE } from "./memory-source.js";

export const IMAGE = "img:local";
export const IMAGE_ID = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

// Boot lines as the practice engine prints them for vLLM's mp backend (docker-images/practice-engine/
// serve, lib/rendezvous.js; test/unit/timeout-blame.test.ts reads the same).
export const UP_TO_MAX_LEN = ["(APIServer pid=1) INFO non-default args: {}", "(APIServer pid=1) INFO Resolved architecture: PracticeForCausalLM", "(APIServer pid=1) INFO Using max model len 32768"];
export const HEAD_WAITING = [...UP_TO_MAX_LEN, "(EngineCore_DP0 pid=1) INFO waiting for 1 headless worker(s) on 10.9.0.1:29501"];
export const WORKER_CONNECTING = [...UP_TO_MAX_LEN, "(EngineCore_DP0 pid=1) INFO connecting to master at 10.9.0.1:29501 as rank 1 of 2"];
export const WORKER_CONNECTED = [...WORKER_CONNECTING, "(EngineCore_DP0 pid=1) INFO connected to master at 10.9.0.1:29501, waiting for all workers"];
/** The head's API line: ready (vllm/entrypoints/openai/api_server.py). */
export const API_UP = (port: number): string => `(APIServer pid=1) INFO [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:${port}`;
// What `ray start` prints (ray-project/ray python/ray/scripts/scripts.py start()).
export const RAY_HEAD_UP = ["Local node IP: 10.9.0.1", "--------------------", "Ray runtime started.", "--------------------"];
export const RAY_WORKER_NOT_JOINED = ["Local node IP: 10.9.0.2"];

export interface FakeClusterOptions {
  /** How many nodes, n1..nN (default 2). */
  readonly nodes?: number;
  /** Each node's /proc/meminfo (default: 128 GiB, 127 available). */
  readonly meminfo?: string;
  /** The image every node holds (default: IMAGE with IMAGE_ID, ENTRYPOINT vllm serve, vLLM 0.12.0); null: none. */
  readonly image?: FakeImage | null;
  /** More lines of the cluster file, before the nodes (memory_floor = 0, ...). */
  readonly clusterExtra?: string;
}

/** Progress that keeps the notes and each node's last phase. */
export interface NotedProgress extends Progress {
  readonly notes: string[];
}

export class FakeCluster {
  /** Each container's script once `docker run` made it; default: serve. */
  script: (c: ContainerInfo, node: FakeNode) => void | Promise<void> = (c, n) => this.serve(c, n);
  readonly notes: string[] = [];
  /** Each `docker run`, as `node/container`, in the order the nodes were asked. */
  readonly started: string[] = [];
  private readonly engines = new Map<string, Promise<FakeEngine>>();

  private constructor(
    readonly cluster: Cluster,
    readonly nodes: readonly FakeNode[],
  ) {
    for (const n of nodes) {
      n.onRun = (c) => void (this.started.push(`${n.node}/${c.name}`), Promise.resolve(this.script(c, n)).catch((e: unknown) => n.say(c.name, `fake script failed: ${String(e)}`)));
      n.onExit = (c) => void this.engines.get(`${n.node}/${c.name}`)?.then((e) => e.close());
    }
  }

  static async start(options: FakeClusterOptions = {}): Promise<FakeCluster> {
    const count = options.nodes ?? 2;
    const port = await freePort();
    const nodesToml = Array.from({ length: count }, (_, i) => `[[nodes]]\nname = "n${i + 1}"\nhost = "127.0.0.${i + 1}"\nfabric_ip = "10.9.0.${i + 1}"\nfabric_iface = "enp${i + 1}"\n`).join("");
    const parsed = parseCluster("fake.toml", `name = "fake"\napi_port = ${port}\n${options.clusterExtra ?? ""}\n${nodesToml}`);
    assert.ok(parsed.cluster, JSON.stringify(parsed.diagnostics));
    const image: FakeImage | null = options.image === undefined ? { id: IMAGE_ID, entrypoint: ["vllm", "serve"] } : options.image;
    const nodes = parsed.cluster.nodes.map((n) => new FakeNode(n.name, { ...(options.meminfo === undefined ? {} : { meminfo: options.meminfo }), images: image === null ? {} : { [IMAGE]: image } }));
    return new FakeCluster(parsed.cluster, nodes);
  }

  /** The session launcher's code takes: the cluster and each node's Docker. */
  get session(): ClusterSession {
    return { cluster: this.cluster, docker: new Map(this.nodes.map((n) => [n.node, n])) };
  }

  node(name: string): FakeNode {
    const n = this.nodes.find((x) => x.node === name);
    if (n === undefined) throw new Error(`no fake node ${name}`);
    return n;
  }

  /** The plan of recipe `toml` (id `id`) on this cluster, made by planDeployment. */
  plan(toml: string, options: PlanOptions = {}, id = "r"): Plan {
    const r = resolveRecipe(id, memorySource({ [`recipes/${id}/recipe.toml`]: toml }));
    assert.ok(r.recipe, JSON.stringify(r.diagnostics));
    const p = planDeployment(r.recipe, this.cluster, options);
    assert.ok(p.ok, JSON.stringify(p));
    return p.plan;
  }

  /** Progress that records notes here (fc.notes). */
  progress(): NotedProgress {
    const notes = this.notes;
    return { notes, node: () => undefined, note: (t) => void notes.push(t), done: () => undefined };
  }

  /** `up()` of `plan` over the fake nodes: a 20 s timeout, no push, unless `options` says otherwise. */
  up(plan: Plan, options: Partial<UpOptions> = {}): Promise<UpResult> {
    return up(plan, this.session, { timeoutMs: 20_000, signal: new AbortController().signal, progress: this.progress(), push: false, ...options });
  }

  /**
   * The host of `upUseCase` over the fake nodes (their session, this cluster's progress), planning
   * `plan` whatever it is asked: a 20 s timeout, no push, no drain.
   */
  upHost(store: StateStore, plan: Plan): UpHost {
    return {
      plan: () => plan,
      store,
      say: () => undefined,
      progress: this.progress(),
      signal: new AbortController().signal,
      now: () => new Date(),
      leaseMs: 60_000,
      timeoutMs: 20_000,
      drainMs: 0,
      push: false,
      openSession: async () => this.session,
    };
  }

  /**
   * The default script: the head's engine listens on the deployment's endpoint and the head logs
   * up to its API line; a worker logs that it joined the head.
   */
  async serve(c: ContainerInfo, node: FakeNode): Promise<void> {
    if (c.labels[LABELS.rank] !== "0") return node.say(c.name, ...WORKER_CONNECTED);
    const url = new URL(c.labels[LABELS.endpoint] ?? "");
    const engine = startFakeEngine({ host: url.hostname, port: Number(url.port), model: c.labels[LABELS.served_model] ?? "m" });
    this.engines.set(`${node.node}/${c.name}`, engine);
    const e = await engine;
    node.say(c.name, ...HEAD_WAITING, API_UP(e.port));
  }

  /**
   * `plan`'s containers on its nodes as another launcher's boot `bootId` left them (running,
   * logging `log` per rank), without `up`: a deployment already there.
   */
  place(plan: Plan, bootId = "0123456789ab", log: (rank: number) => readonly string[] = () => []): Plan {
    const stamped = stampBoot(plan, bootId);
    for (const spec of stamped.nodes) this.node(spec.node).add(spec.container, spec.labels, { image: spec.image, log: log(spec.rank) });
    return stamped;
  }

  /** Every container on every node as `node:name:state`, sorted (the rig's launcherContainers). */
  containers(): string[] {
    return this.nodes.flatMap((n) => n.states().map((s) => `${n.node}:${s}`)).sort();
  }

  /** Stops the engines still listening. */
  async close(): Promise<void> {
    await Promise.all([...this.engines.values()].map(async (e) => (await e).close()));
  }
}

/** The labels of one rank of a deployment on cluster "fake", as up sets them (its served model is `servedModel`, default the recipe's name). */
export function rankLabels(deployment: string, recipe: string, r: number, nodes: readonly string[], lane?: string, servedModel = recipe): Record<string, string> {
  return encodeLabels({
    deployment,
    recipe,
    recipe_hash: "h",
    engine: "vllm",
    served_model: servedModel,
    rank: r,
    role: r === 0 ? "head" : "worker",
    node: nodes[r] ?? "?",
    nnodes: nodes.length,
    nodes: [...nodes],
    cluster: "fake",
    endpoint: `http://${nodes[0] ?? "?"}:8000`,
    ...(lane === undefined ? {} : { lane }),
  });
}
