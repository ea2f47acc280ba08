import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { crdCheck, lwsCrdOf } from "../../src/export/lws-crd.js";
import type { CrdCheck } from "../../src/export/validate.js";

/*
 * The LeaderWorkerSet CRD as kubernetes-sigs/lws publishes it (config/crd/bases/, main of
 * 2026-08-21, after v0.10.0), kept beside the project in the shared work tree and never copied into
 * it. Tests hold exports to it where it is; in a clone elsewhere those tests are skipped, saying so.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
export const REFERENCE_CRD = path.resolve(ROOT, "../shared/reference/lws-v0.10/leaderworkerset.x-k8s.io_leaderworkersets.yaml");

/** node:test's `skip` for a test that needs the reference CRD: false where it is, else why not. */
export const NO_REFERENCE: string | false = existsSync(REFERENCE_CRD) ? false : `the published LWS CRD is not at ${REFERENCE_CRD} (a clone outside the shared work tree), so nothing is checked against it here`;

let compiled: CrdCheck | undefined;
/** The reference CRD's check, compiled once for the file (a few hundred ms). */
export function referenceCheck(): CrdCheck {
  compiled ??= { file: REFERENCE_CRD, check: crdCheck(lwsCrdOf(readFileSync(REFERENCE_CRD, "utf8"), REFERENCE_CRD)) };
  return compiled;
}

/**
 * A hand-made CRD-shaped YAML: the LWS CRD's name and group, a v1 whose schema is the published
 * one's outline with pod templates left open, and `leaderWorkerTemplate` requiring `require` too.
 */
export function handMadeCrd(require: readonly string[] = []): string {
  const open = { type: "object", "x-kubernetes-preserve-unknown-fields": true };
  const schema = {
    type: "object",
    properties: {
      apiVersion: { type: "string" },
      kind: { type: "string" },
      metadata: { type: "object" },
      spec: {
        type: "object",
        required: ["leaderWorkerTemplate"],
        properties: {
          replicas: { type: "integer" },
          startupPolicy: { type: "string", enum: ["LeaderCreated", "LeaderReady"] },
          leaderWorkerTemplate: {
            type: "object",
            required: ["workerTemplate", ...require],
            properties: { size: { type: "integer" }, restartPolicy: { type: "string" }, leaderTemplate: open, workerTemplate: open, subGroupPolicy: { type: "object" } },
          },
        },
      },
    },
  };
  const crd = {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "leaderworkersets.leaderworkerset.x-k8s.io" },
    spec: { group: "leaderworkerset.x-k8s.io", names: { kind: "LeaderWorkerSet", plural: "leaderworkersets" }, scope: "Namespaced", versions: [{ name: "v1", served: true, storage: true, schema: { openAPIV3Schema: schema } }] },
  };
  return stringify(crd, { aliasDuplicateObjects: false });
}
