import { encodeLabels, LABELS } from "../../src/contract/deployment.js";
import type { Plan } from "../../src/plan/plan.js";
import type { ContainerInfo, Docker, LogsOptions } from "../../src/remote/docker.js";
import type { ExecOptions, ExecResult, Transport } from "../../src/remote/transport.js";
import { startFakeEngine, type FakeEngine } from "./fake-engine.js";
import { FakeNode } from "./fake-node.js";

// Hand-made nodes for tests that script a node's answers operation by operation (what a
// supervisor reads, in which order) rather than keep its containers (FakeNode): a FakeNode whose
// listing, stop, removal and logs are the test's own functions.

/** The operations a hand-made node answers itself; the rest are FakeNode's. */
export interface DockerParts {
  containers(label?: string): Promise<ContainerInfo[]>;
  /** Default: nothing to stop. */
  stop?(names: readonly string[], seconds?: number): Promise<void>;
  stopAndRemove(names: readonly string[], seconds?: number): Promise<void>;
  logs(container: string, options?: LogsOptions): AsyncIterable<string>;
}

/**
 * A node of `parts`, with the one-round-trip forms (stopThenList, logsThenRemove) made of the
 * parts, as the scripts on a node do them.
 */
export function dockerFrom(parts: DockerParts, node = "fake"): Docker {
  // `this`, not the object made here: a test may derive a node from this one (Object.create) and
  // answer some parts anew, which the one-round-trip forms then use.
  return Object.assign(new FakeNode(node), {
    stop: async (): Promise<void> => undefined,
    ...parts,
    async stopThenList(this: Docker, label: string, names: readonly string[]): Promise<ContainerInfo[]> {
      await this.stop(names, 0);
      return this.containers(label);
    },
    async logsThenRemove(this: Docker, container: string, tail: number, names: readonly string[]): Promise<string[]> {
      const lines: string[] = [];
      for await (const l of this.logs(container, { tail })) lines.push(l);
      await this.stopAndRemove(names, 0);
      return lines;
    },
  });
}

/**
 * A node whose containers follow `log`, then either wait (a boot still going) or end (they
 * exited). What is removed is pushed to `removed` as `node:container`, and is listed no more.
 */
export function fakeNode(node: string, containers: readonly ContainerInfo[], log: readonly string[], ends: boolean, removed: string[]): Docker {
  return dockerFrom(
    {
      containers: async () => containers.filter((c) => !removed.includes(`${node}:${c.name}`)),
      stopAndRemove: async (names) => void removed.push(...names.map((n) => `${node}:${n}`)),
      logs: async function* (_c, o = {}) {
        yield* log;
        if (ends || o.follow !== true) return;
        await new Promise<void>((resolve) => (o.signal?.aborted ? resolve() : o.signal?.addEventListener("abort", () => resolve(), { once: true })));
      },
    },
    node,
  );
}

/** The plan of servingNode's deployment d, its engine at `url`. */
export const servingPlan = (url: string): Plan =>
  ({
    deployment: "d",
    cluster: "c",
    endpoint: url,
    served_model: "m",
    recipe_hash: "h",
    recipe: { id: "r", engine: "vllm", docker_image: "img" },
    nodes: [{ rank: 0, node: "n1", container: "launcher-d-r0", labels: {}, argv: ["docker", "run"] }],
    start_order: ["n1"],
    start: "head first",
  }) as unknown as Plan;

/** The launch id of the one-rank deployment `d` that servingNode runs. */
export const SERVING_BOOT = "0123456789ab";

/** A node serving deployment d's one rank (launch SERVING_BOOT); what is removed goes to `removed` as `n1:container`. */
export function servingNode(removed: string[]): Docker {
  const labels = { ...encodeLabels({ deployment: "d", recipe: "r", recipe_hash: "h", engine: "vllm", served_model: "m", rank: 0, role: "head", node: "n1", nnodes: 1, nodes: ["n1"], cluster: "c", endpoint: "http://n1:8000" }), [LABELS.boot]: SERVING_BOOT };
  const c: ContainerInfo = { id: "id0", name: "launcher-d-r0", labels, state: "running", running: true, exitCode: 0, startedAt: "2026-01-01T00:00:01Z", finishedAt: "0001-01-01T00:00:00Z", image: "img" };
  const log = ["2026-01-01T00:00:02.000000000Z (APIServer pid=1) INFO 01-01 00:00:02 [api_server.py:1] Starting vLLM API server 0 on http://0.0.0.0:8000"];
  return fakeNode("n1", [c], log, false, removed);
}

/** A stand-in engine on loopback, ready (test/support/fake-engine.ts). */
export const readyEngine = (): Promise<FakeEngine> => startFakeEngine();

/** A transport to node `node` that records each command (argv and options) and answers `docker run` with container id `cid`. */
export function recordingTransport(node = "a1"): { transport: Transport; calls: { argv: readonly string[]; options?: ExecOptions }[] } {
  const calls: { argv: readonly string[]; options?: ExecOptions }[] = [];
  const transport: Transport = {
    node,
    exec: async (argv, options): Promise<ExecResult> => {
      calls.push({ argv, ...(options === undefined ? {} : { options }) });
      return { code: 0, stdout: "cid\n", stderr: "" };
    },
    stream: () => (async function* () {})(),
    spawn: () => {
      throw new Error("not used");
    },
  };
  return { transport, calls };
}
