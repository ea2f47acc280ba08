import { Ajv, type ErrorObject } from "ajv";
import { parseAllDocuments } from "yaml";
import { error } from "../config/diagnostic.js";
import { UserError } from "../config/errors.js";

/*
 * `launcher export k8s --crd FILE`: the LeaderWorkerSet CRD as the user's cluster has it
 * (`kubectl get crd leaderworkersets.leaderworkerset.x-k8s.io -o yaml`, or the CRD file of the LWS
 * release installed), whose v1 openAPIV3Schema the export's LeaderWorkerSet is then held to with
 * ajv: the API server's own check, asked before anything is written.
 */

/** The CRD's name: PLURAL.GROUP (Kubernetes docs, "Extend the Kubernetes API with CustomResourceDefinitions"). */
export const LWS_CRD_NAME = "leaderworkersets.leaderworkerset.x-k8s.io";
/** The published CRD is 1.3 MB (LWS v0.10, pod templates in full); a file past this is not one. */
export const CRD_MAX_BYTES = 8 * 1024 * 1024;

export interface LwsCrd {
  /** The file as the user named it, for every message about it. */
  readonly file: string;
  /** Its v1 version's openAPIV3Schema. */
  readonly schema: object;
}

const HINT = `give the CRD your cluster holds: kubectl get crd ${LWS_CRD_NAME} -o yaml > lws-crd.yaml, then --crd lws-crd.yaml (or --crd - with it on standard input)`;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const short = (v: unknown): string => String(v).slice(0, 80);

/** Every object of a YAML stream, a List's items taken out (`kubectl get crd A B -o yaml` prints a List). */
function objectsOf(text: string, file: string): unknown[] {
  const docs = parseAllDocuments(text);
  const objects: unknown[] = [];
  for (const doc of docs) {
    const bad = doc.errors[0];
    if (bad !== undefined) {
      const at = bad.linePos?.[0];
      throw new UserError(`--crd ${file} is not YAML: ${bad.message.split("\n")[0] ?? ""}`, HINT, at === undefined ? [] : [error({ file, line: at.line, col: at.col }, "not YAML")]);
    }
    let value: unknown;
    try {
      // yaml's toJS bounds alias expansion (maxAliasCount, 100 by default) and throws past it.
      value = doc.toJS();
    } catch (e) {
      throw new UserError(`--crd ${file} cannot be read as YAML: ${e instanceof Error ? e.message : String(e)}`, HINT);
    }
    objects.push(...(isRecord(value) && value.kind === "List" && Array.isArray(value.items) ? value.items : [value]));
  }
  return objects;
}

/** What a file holds instead of the CRD, in a few words: "Deployment lws-controller-manager, ...". */
function found(objects: readonly unknown[]): string {
  const named = objects.filter(isRecord).map((o) => `${short(o.kind ?? "an object without kind")}${isRecord(o.metadata) && o.metadata.name !== undefined ? ` ${short(o.metadata.name)}` : ""}`);
  if (named.length === 0) return "no Kubernetes object";
  return named.length > 5 ? `${named.slice(0, 5).join(", ")} and ${named.length - 5} more` : named.join(", ");
}

/**
 * The LWS CRD in `text` (one YAML or JSON document, a stream of them such as an LWS release's
 * manifests, or a List), as its v1 schema. Anything else is the user's to fix: a UserError naming
 * the file and what it holds.
 */
export function lwsCrdOf(text: string, file: string): LwsCrd {
  const objects = objectsOf(text, file);
  const crd = objects.find((o) => isRecord(o) && o.kind === "CustomResourceDefinition" && isRecord(o.metadata) && o.metadata.name === LWS_CRD_NAME);
  if (!isRecord(crd)) throw new UserError(`--crd ${file} holds no CustomResourceDefinition ${LWS_CRD_NAME} (it holds ${found(objects)})`, HINT);
  const versions = isRecord(crd.spec) && Array.isArray(crd.spec.versions) ? crd.spec.versions.filter(isRecord) : [];
  const v1 = versions.find((v) => v.name === "v1");
  const schema = isRecord(v1) && isRecord(v1.schema) ? v1.schema.openAPIV3Schema : undefined;
  if (!isRecord(schema)) {
    const has = versions.map((v) => short(v.name)).join(", ") || "none";
    throw new UserError(`--crd ${file}: its LeaderWorkerSet CRD has no version v1 with an openAPIV3Schema (versions: ${has})`, "launcher writes leaderworkerset.x-k8s.io/v1: install an LWS release that serves it, and give its CRD");
  }
  return { file, schema };
}

/**
 * The schema as kubectl holds an object to it. A CRD's structural schema lets the API server
 * prune fields it does not name, but kubectl's `--validate` defaults to strict ("fail the request
 * if invalid", with the server's unknown-field validation, KEP-2885, stable in Kubernetes 1.27),
 * so every object that names its properties, and does not keep unknown fields
 * (x-kubernetes-preserve-unknown-fields), takes no other property here: a misspelt field the
 * server would refuse fails here first.
 */
export function strictSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(strictSchema);
  if (schema === null || typeof schema !== "object") return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) out[k] = k === "properties" && v !== null && typeof v === "object" ? Object.fromEntries(Object.entries(v).map(([p, s]) => [p, strictSchema(s)])) : strictSchema(v);
  const s = schema as Record<string, unknown>;
  if (s.properties !== undefined && s.additionalProperties === undefined && s["x-kubernetes-preserve-unknown-fields"] !== true) out.additionalProperties = false;
  return out;
}

const line = (e: ErrorObject): string => `${e.instancePath || "/"}: ${e.message ?? "is wrong"}${e.params !== undefined && "allowedValues" in e.params ? ` (${(e.params.allowedValues as unknown[]).join(", ")})` : ""}${e.params !== undefined && "additionalProperty" in e.params ? `: ${String(e.params.additionalProperty)}` : ""}`;

/** A check of a LeaderWorkerSet: every problem as "PATH: what", [] when it passes. */
export type LwsCheck = (lws: unknown) => string[];

/**
 * The CRD's check, compiled once (the published schema takes a few hundred ms). Formats and the
 * x-kubernetes-* keywords are not JSON Schema, and ajv (strict: false) passes over them. A schema
 * ajv cannot compile is the file's fault, said as such.
 */
export function crdCheck(crd: LwsCrd): LwsCheck {
  let validate: ReturnType<Ajv["compile"]>;
  try {
    validate = new Ajv({ strict: false, allErrors: true, validateFormats: false }).compile(strictSchema(crd.schema) as object);
  } catch (e) {
    throw new UserError(`--crd ${crd.file}: its v1 openAPIV3Schema is not a schema launcher can check against (${e instanceof Error ? e.message.slice(0, 200) : String(e)})`, HINT);
  }
  return (lws) => (validate(lws) ? [] : (validate.errors ?? []).map(line));
}
