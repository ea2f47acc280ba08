import { randomBytes } from "node:crypto";
import type { Plan } from "../plan/plan.js";
import type { ContainerInfo } from "../remote/docker.js";
import { LABELS } from "../contract/deployment.js";

const BOOT_LABEL = LABELS.boot;

/** A fresh identity for one `up`: 12 hex digits, random, so two launchers never pick the same. */
export const newBootId = (): string => randomBytes(6).toString("hex");

/**
 * The plan as this boot runs it: every container also labelled with the boot's id. Added here, at
 * launch, and nowhere else, so that `plan` prints the same command every time and a rollback can
 * tell this boot's containers from any other's (`createdBy`).
 */
export function stampBoot(plan: Plan, bootId: string): Plan {
  return stampLabel(plan, BOOT_LABEL, bootId);
}

/**
 * The plan with one more label on every container (in its labels and its `docker run`), replacing
 * that label where the plan has it already: a kept plan is stamped again at each restart.
 */
export function stampLabel(plan: Plan, key: string, value: string): Plan {
  const label = `${key}=${value}`;
  return {
    ...plan,
    nodes: plan.nodes.map((spec) => {
      const argv = spec.argv.filter((a, i) => !(a.startsWith(`${key}=`) && spec.argv[i - 1] === "--label") && !(a === "--label" && spec.argv[i + 1]?.startsWith(`${key}=`) === true));
      // Beside the plan's own labels, well before the image: `docker run` reads it as an option.
      const at = argv.indexOf("--label");
      if (at < 0) throw new Error(`the plan of ${spec.node} has no --label: cannot stamp ${key}`);
      return { ...spec, labels: { ...spec.labels, [key]: value }, argv: [...argv.slice(0, at), "--label", label, ...argv.slice(at)] };
    }),
  };
}

/** Does this container belong to that boot? What a rollback removes, and nothing else. */
export const createdBy =
  (bootId: string) =>
  ({ c }: { readonly c: ContainerInfo }): boolean =>
    c.labels[BOOT_LABEL] === bootId;
