import * as z from "zod";

/*
 * launcher's knowledge of the LeaderWorkerSet API: exactly the fields `launcher export k8s`
 * writes, with the types and values the CRD gives them. Taken from kubernetes-sigs/lws
 * config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml (main of 2026-08-21, after
 * release v0.10.0), version v1's openAPIV3Schema:
 *   spec.replicas                                    integer, int32, 0..1000000
 *   spec.startupPolicy                               LeaderCreated | LeaderReady (a field of spec, not of leaderWorkerTemplate)
 *   spec.leaderWorkerTemplate.size                   integer, int32 (the API's docs: at least 1, the leader)
 *   spec.leaderWorkerTemplate.restartPolicy          Default | RecreateGroupOnPodRestart | RecreateGroupAfterStart | None
 *   spec.leaderWorkerTemplate.{leader,worker}Template  a pod template (workerTemplate required); its metadata
 *                                                    takes labels (string -> string), its spec is a core PodSpec
 * The objects are strict: a field the export misspells, or one it starts to write without this
 * schema knowing it (networkConfig, rolloutStrategy, subGroupPolicy: not written today), fails
 * here. The pod specs are the core API's, checked by kubernetes-models (./validate.ts).
 * test/unit/export-k8s.test.ts holds every export to the published CRD itself, where the file is
 * beside the project, and `--crd FILE` holds it to the cluster's.
 */

const INT32_MAX = 2 ** 31 - 1;
const stringMap = z.record(z.string(), z.string());

const podTemplate = z.strictObject({
  metadata: z.strictObject({ labels: stringMap }),
  spec: z.record(z.string(), z.unknown()),
});

export const LEADER_WORKER_SET = z.strictObject({
  apiVersion: z.literal("leaderworkerset.x-k8s.io/v1"),
  kind: z.literal("LeaderWorkerSet"),
  metadata: z.strictObject({
    name: z.string().min(1),
    namespace: z.string().min(1).optional(),
    labels: stringMap,
    annotations: stringMap,
  }),
  spec: z.strictObject({
    replicas: z.int().min(0).max(1_000_000),
    startupPolicy: z.enum(["LeaderCreated", "LeaderReady"]),
    leaderWorkerTemplate: z.strictObject({
      size: z.int().min(1).max(INT32_MAX),
      restartPolicy: z.enum(["Default", "RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None"]),
      leaderTemplate: podTemplate.optional(),
      workerTemplate: podTemplate,
    }),
  }),
});

/** A path as a JSON pointer, as ajv's instancePath writes one ("/" for the object itself). */
export const pointer = (path: readonly PropertyKey[]): string => `/${path.map(String).join("/")}`;

/** Every problem of a LeaderWorkerSet against launcher's schema of it, as "PATH: what"; [] when it is one. */
export function lwsProblems(lws: unknown): string[] {
  const r = LEADER_WORKER_SET.safeParse(lws);
  return r.success ? [] : r.error.issues.map((i) => `${pointer(i.path)}: ${i.message}`);
}
