import { validate as podTemplateSchema } from "kubernetes-models/_schemas/IoK8sApiCoreV1PodTemplateSpec";
import { validate as serviceSchema } from "kubernetes-models/_schemas/IoK8sApiCoreV1Service";
import { PodTemplateSpec } from "kubernetes-models/v1/PodTemplateSpec";
import { Service } from "kubernetes-models/v1/Service";
import { unknownFields, type CoreValidate } from "./core-fields.js";
import type { LwsCheck } from "./lws-crd.js";
import { lwsProblems } from "./lws-schema.js";
import type { K8sExport } from "./lws.js";

/** The cluster's own LWS CRD (`--crd FILE`): its file, for the messages, and its compiled check. */
export interface CrdCheck {
  readonly file: string;
  readonly check: LwsCheck;
}

/**
 * Every problem of the export against its schemas, as "OBJECT PATH: what": the LeaderWorkerSet
 * against launcher's schema of LWS's API (./lws-schema.ts) and, given one, against the cluster's
 * CRD (ajv); its pod templates and the Service against the core API's (kubernetes-models), with
 * no field those schemas do not name (./core-fields.ts), as kubectl's strict validation holds them.
 * [] when it validates.
 */
export function exportProblems(manifest: K8sExport, crd?: CrdCheck): string[] {
  const problems = [
    ...lwsProblems(manifest.lws).map((p) => `LeaderWorkerSet ${p}`),
    ...(crd === undefined ? [] : crd.check(manifest.lws).map((p) => `LeaderWorkerSet ${p} (the CRD in ${crd.file})`)),
  ];
  const template = (manifest.lws.spec as { leaderWorkerTemplate?: Record<string, unknown> } | undefined)?.leaderWorkerTemplate ?? {};
  const core: [string, unknown, () => void, CoreValidate][] = [
    ...(["leaderTemplate", "workerTemplate"] as const).filter((t) => template[t] !== undefined).map((t): [string, unknown, () => void, CoreValidate] => [`LeaderWorkerSet /spec/leaderWorkerTemplate/${t}`, template[t], () => new PodTemplateSpec(template[t] as never).validate(), podTemplateSchema]),
    ["Service", manifest.service, () => new Service(manifest.service as never).validate(), serviceSchema],
  ];
  for (const [what, value, check, schema] of core) {
    try {
      check();
    } catch (e) {
      problems.push(`${what}: ${e instanceof Error ? e.message : String(e)}`);
      continue;
    }
    for (const field of unknownFields(value, schema)) problems.push(`${what}${field}: a field the core API does not have (kubectl --validate=strict refuses it)`);
  }
  return problems;
}
