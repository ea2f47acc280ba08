import { LABEL_PREFIX } from "../plan/plan.js";
import type { ContainerInfo } from "../remote/docker.js";

export const DEPLOYMENT_LABEL = `${LABEL_PREFIX}deployment`;
/** Which `up` created the container (a random id per boot): a rollback removes only its own. */
export const BOOT_LABEL = `${LABEL_PREFIX}boot`;

export const label = (c: ContainerInfo, name: string): string | undefined => c.labels[`${LABEL_PREFIX}${name}`];

/** Does a target given on the command line (deployment, lane or recipe name) name this container? */
export function matchesTarget(c: ContainerInfo, target: string): boolean {
  return label(c, "deployment") === target || label(c, "lane") === target || label(c, "recipe") === target;
}
