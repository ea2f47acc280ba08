import { Document, isMap, isScalar, type YAMLMap } from "yaml";
import { GENERATION_LIVENESS_COMMENT, type K8sExport } from "./lws.js";

/**
 * Why LeaderCreated, written over the field in the YAML. kubernetes-sigs/lws: startupPolicy
 * LeaderReady creates the workers' StatefulSet only once the leader pod is Ready
 * (pkg/controllers/leaderworkerset_controller.go; the API's StartupPolicy docs: "LeaderReady
 * creates the workers statefulset after the leader pod is ready"), LeaderCreated as soon as the
 * leader pod exists.
 */
export const STARTUP_POLICY_COMMENT = [
  " startupPolicy LeaderCreated: the workers start as soon as the leader pod exists.",
  " LeaderReady would deadlock: the leader is Ready only when its engine answers its health",
  " check, which it does only after every worker has joined the rendezvous; the workers",
  " would wait for a leader that waits for them.",
].join("\n");

export const RESTART_POLICY_COMMENT = " A pod that fails or restarts recreates the whole group: the ranks of one engine cannot rejoin one by one.";

function commentKey(map: unknown, key: string, comment: string): void {
  if (!isMap(map)) return;
  const pair = (map as YAMLMap).items.find((p) => isScalar(p.key) && p.key.value === key);
  if (pair !== undefined && isScalar(pair.key)) pair.key.commentBefore = comment;
}

/** The two objects as one YAML stream, the LeaderWorkerSet first, with `header` above it. */
export function manifestYaml(manifest: K8sExport, header: string): string {
  // No anchors: kubectl reads them, but a reader of the file should see every probe whole.
  const lws = new Document(manifest.lws, { aliasDuplicateObjects: false });
  lws.commentBefore = header;
  const spec = lws.get("spec", true);
  commentKey(spec, "startupPolicy", STARTUP_POLICY_COMMENT);
  commentKey(isMap(spec) ? spec.get("leaderWorkerTemplate", true) : undefined, "restartPolicy", RESTART_POLICY_COMMENT);
  for (const template of ["leaderTemplate", "workerTemplate"]) {
    const container = lws.getIn(["spec", "leaderWorkerTemplate", template, "spec", "containers", 0], true);
    const liveness = isMap(container) ? container.get("livenessProbe", true) : undefined;
    if (isMap(liveness) && liveness.has("exec")) commentKey(container, "livenessProbe", GENERATION_LIVENESS_COMMENT);
  }
  const service = new Document(manifest.service, { aliasDuplicateObjects: false });
  const options = { lineWidth: 0 } as const;
  return `${lws.toString(options)}---\n${service.toString(options)}`;
}
