import { writeFileSync } from "node:fs";
import { Option, type Command } from "commander";
import { UserError } from "../config/errors.js";
import { readTextFile, readTextStdin } from "../config/read-file.js";
import type { CrdCheck } from "../export/validate.js";
import type { Output } from "../app/output.js";
import { clusterOption, jsonOption } from "./options.js";

interface K8sFlags {
  cluster?: string;
  namespace?: string;
  lane?: string;
  name?: string;
  port?: string;
  output?: string;
  image?: string;
  network: "host" | "pod";
  rdmaResource?: string;
  pvc: string[];
  home?: string;
  crd?: string;
  nodeIpIsFabric?: boolean;
  json?: boolean;
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

/** `--pvc /container/path=claim`, each once. */
export function parseClaims(values: readonly string[]): Record<string, string> {
  const claims: Record<string, string> = {};
  for (const v of values) {
    const at = v.lastIndexOf("=");
    const [path, claim] = [v.slice(0, at), v.slice(at + 1)];
    if (at <= 0 || claim === "" || !path.startsWith("/")) throw new UserError(`--pvc ${v}: expected CONTAINER_PATH=CLAIM (an absolute path in the container, then a PersistentVolumeClaim's name)`);
    if (Object.hasOwn(claims, path)) throw new UserError(`--pvc names ${path} twice`);
    claims[path] = claim;
  }
  return claims;
}

/** `--crd FILE` (or `-`, standard input): read with a bound, parsed and compiled, or a user error naming it. */
async function crdOf(file: string): Promise<CrdCheck> {
  const { CRD_MAX_BYTES, crdCheck, lwsCrdOf } = await import("../export/lws-crd.js");
  const what = "LeaderWorkerSet CRD";
  const shown = file === "-" ? "standard input" : file;
  const text = file === "-" ? await readTextStdin(what, CRD_MAX_BYTES, "pipe it in: kubectl get crd leaderworkersets.leaderworkerset.x-k8s.io -o yaml | launcher export k8s RECIPE --crd -") : readTextFile(file, what, CRD_MAX_BYTES);
  return { file: shown, check: crdCheck(lwsCrdOf(text, shown)) };
}

export function registerExportK8s(group: Command, io: Output): void {
  group
    .command("k8s")
    .description("write a recipe as a Kubernetes LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) and a Service for its API, validated against their schemas")
    .argument("<recipe>", "recipe name, folder or recipe.toml")
    .addOption(clusterOption())
    .option("--namespace <namespace>", "the objects' namespace (default: kubectl's)")
    .option("--lane <name>", "the Service's name, in front of the leader's OpenAI port (default: NAME-api)")
    .option("--name <name>", "the LeaderWorkerSet's name (default: the recipe name)")
    .option("--port <port>", "the API port (default: the cluster's api_port, 8000)")
    .option("-o, --output <file>", "write the YAML to this file (default: stdout)")
    .option("--image <ref>", "the image in a registry every pod pulls (default: the recipe's, unless launcher builds it)")
    .addOption(new Option("--network <kind>", "host: the node's network (RoCE, NCCL's ports); pod: the pod network").choices(["host", "pod"]).default("host"))
    .option("--rdma-resource <name>", "an RDMA device plugin's resource to request (e.g. rdma/rdma_shared_device_a) instead of a privileged pod with /dev/infiniband")
    .option("--pvc <path=claim>", "mount this PersistentVolumeClaim at a recipe mount's container path instead of the node's folder (repeatable)", collect, [])
    .option("--home <dir>", "what ~ in the recipe's mounts stands for on the nodes (default: the nodes' home, when they share one)")
    .option("--crd <file>", "also check the LeaderWorkerSet against this LWS CRD, as your cluster has it (kubectl get crd leaderworkersets.leaderworkerset.x-k8s.io -o yaml); - reads it from stdin")
    .option("--node-ip-is-fabric", "every node's Kubernetes address is its fabric address (k3s or MicroK8s --node-ip set to it): each pod checks it at start, and workers that may listen only on the fabric listen on their pod IP")
    .addOption(jsonOption("print the objects and notes as one JSON object"))
    .action(async (ref: string, flags: K8sFlags) => {
      // Loaded here: `launcher export systemd` starts without the planner, the engines and the schemas.
      const [{ loadCluster, localRecipes }, { planFromFlags }, { withSshDefaults }, { adapterOf }] = await Promise.all([
        import("../app/this-process.js"),
        import("../app/plan-flags.js"),
        import("../nodes/session.js"),
        import("../engine/registry.js"),
      ]);
      const cluster = await withSshDefaults(loadCluster(flags.cluster));
      // Fabric gaps are no matter here: each pod detects its own fabric when it starts.
      const plan = planFromFlags(ref, flags, io, cluster, "ignore", localRecipes());
      const engine = adapterOf(plan.recipe.engine);
      if (engine === undefined) throw new Error(`no adapter for engine ${plan.recipe.engine}`);
      const { exportHeader, exportK8s, exportOptions } = await import("../export/k8s.js");
      const crd = flags.crd === undefined ? undefined : await crdOf(flags.crd);
      const options = exportOptions(plan, cluster, {
        ...(flags.name === undefined ? {} : { name: flags.name }),
        ...(flags.namespace === undefined ? {} : { namespace: flags.namespace }),
        ...(flags.lane === undefined ? {} : { lane: flags.lane }),
        ...(flags.image === undefined ? {} : { image: flags.image }),
        ...(flags.home === undefined ? {} : { home: flags.home }),
        fabric: { network: flags.network, ...(flags.rdmaResource === undefined ? {} : { rdmaResource: flags.rdmaResource }) },
        claims: parseClaims(flags.pvc),
        ...(flags.nodeIpIsFabric === true ? { nodeIpIsFabric: true } : {}),
      });
      const result = exportK8s(plan, engine, options, exportHeader(ref, plan, engine, flags.namespace), crd);
      if (flags.output !== undefined) writeFileSync(flags.output, result.yaml);
      for (const note of result.notes) io.warn(note);
      if (flags.json) io.json({ lws: result.manifest.lws, service: result.manifest.service, notes: result.notes, ...(flags.output === undefined ? {} : { file: flags.output }) });
      else if (flags.output === undefined) io.out(result.yaml.trimEnd());
      else io.err(`launcher: wrote ${flags.output}: LeaderWorkerSet ${options.name} (${plan.nodes.length} pods) and Service ${options.service}; kubectl apply -f ${flags.output}`);
    });
}
