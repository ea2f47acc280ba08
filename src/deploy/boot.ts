import { randomBytes } from "node:crypto";
import type { Plan } from "../plan/plan.js";
import type { ContainerInfo } from "../remote/docker.js";
import { LABELS } from "./contract.js";

const BOOT_LABEL = LABELS.boot;

/** A fresh identity for one `up`: 12 hex digits, random, so two launchers never pick the same. */
export const newBootId = (): string => randomBytes(6).toString("hex");

/**
 * The plan as this boot runs it: every container also labelled with the boot's id. Added here, at
 * launch, and nowhere else, so that `plan` prints the same command every time and a rollback can
 * tell this boot's containers from any other's (`createdBy`).
 */
export function stampBoot(plan: Plan, bootId: string): Plan {
  const label = `${BOOT_LABEL}=${bootId}`;
  return {
    ...plan,
    nodes: plan.nodes.map((spec) => {
      // Beside the plan's own labels, well before the image: `docker run` reads it as an option.
      const at = spec.argv.indexOf("--label");
      if (at < 0) throw new Error(`the plan of ${spec.node} has no --label: cannot stamp the boot`);
      return { ...spec, labels: { ...spec.labels, [BOOT_LABEL]: bootId }, argv: [...spec.argv.slice(0, at), "--label", label, ...spec.argv.slice(at)] };
    }),
  };
}

/** Does this container belong to that boot? What a rollback removes, and nothing else. */
export const createdBy =
  (bootId: string) =>
  ({ c }: { readonly c: ContainerInfo }): boolean =>
    c.labels[BOOT_LABEL] === bootId;
