import { UserError } from "../config/errors.js";
import type { Recipe } from "../recipe/recipe.js";

/** A pod's volume and where the container mounts it, as the core API writes them. */
export interface PodVolume {
  readonly volume: Record<string, unknown>;
  readonly mount: Record<string, unknown>;
}

/** How the recipe's mounts reach a pod: a PVC for the container paths named, else the node's folder. */
export interface MountChoice {
  /** Container path -> the name of a PersistentVolumeClaim mounted there instead of a host folder. */
  readonly claims: Readonly<Record<string, string>>;
  /** What `~` in a host path stands for: a pod has no SSH user, and may run on any node. */
  readonly home?: string;
}

/**
 * Docker's --shm-size as bytes: docker/go-units RAMInBytes (binary multiples, an optional `b`,
 * "32gb" is 32 GiB), which is how `docker run --shm-size` reads it (docker/cli opts.MemBytes).
 */
export function dockerBytes(size: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?) ?([kmgtp])?i?b?$/i.exec(size.trim());
  if (m === null) return undefined;
  const power = m[2] === undefined ? 0 : "kmgtp".indexOf(m[2].toLowerCase()) + 1;
  return Math.floor(Number(m[1]) * 1024 ** power);
}

/** Bytes as a Kubernetes quantity: the largest binary suffix that divides them (Ki, Mi, Gi, Ti). */
export function quantity(bytes: number): string {
  const suffixes = ["Ti", "Gi", "Mi", "Ki"] as const;
  for (const [i, s] of suffixes.entries()) {
    const unit = 1024 ** (suffixes.length - i);
    if (bytes >= unit && bytes % unit === 0) return `${bytes / unit}${s}`;
  }
  return String(bytes);
}

/**
 * /dev/shm in memory of the recipe's size: Docker's --shm-size has no pod field, and the usual way
 * is a memory-backed emptyDir at /dev/shm (Kubernetes docs, Volumes, emptyDir: medium "Memory" is
 * a tmpfs, sizeLimit bounds it).
 */
export function shmVolume(recipe: Pick<Recipe, "shm_size" | "id">): PodVolume {
  const bytes = dockerBytes(recipe.shm_size);
  if (bytes === undefined) throw new UserError(`recipe ${recipe.id}: shm_size ${recipe.shm_size} is not a size Docker reads (e.g. 32gb)`);
  return { volume: { name: "dshm", emptyDir: { medium: "Memory", sizeLimit: quantity(bytes) } }, mount: { name: "dshm", mountPath: "/dev/shm" } };
}

function hostPath(recipe: Pick<Recipe, "id">, host: string, home: string | undefined): string {
  if (host !== "~" && !host.startsWith("~/")) return host;
  if (home === undefined) {
    throw new UserError(
      `recipe ${recipe.id}: mount ${host} is under ~, and the nodes' homes differ (or are unknown): a pod may run on any node`,
      "name the folder ~ stands for with --home DIR, or mount a PersistentVolumeClaim there with --pvc CONTAINER_PATH=CLAIM",
    );
  }
  return home.replace(/\/+$/, "") + host.slice(1);
}

/**
 * The recipe's extra_mounts as pod volumes: a PVC where the user named one for the container
 * path, else the node's folder (hostPath DirectoryOrCreate: `docker run -v` creates a missing host
 * folder too, and a first boot's cache folders may not exist yet).
 */
export function recipeVolumes(recipe: Pick<Recipe, "id" | "extra_mounts">, choice: MountChoice): PodVolume[] {
  const unknown = Object.keys(choice.claims).filter((c) => !recipe.extra_mounts.some((m) => m.container === c));
  if (unknown.length > 0) {
    throw new UserError(`--pvc ${unknown.join(", ")}: recipe ${recipe.id} mounts nothing there`, `its mounts are at ${recipe.extra_mounts.map((m) => m.container).join(", ") || "no path"}`);
  }
  return recipe.extra_mounts.map((m, i) => {
    const name = `mount-${i}`;
    const claim = choice.claims[m.container];
    const volume = claim === undefined
      ? { name, hostPath: { path: hostPath(recipe, m.host, choice.home), type: "DirectoryOrCreate" } }
      : { name, persistentVolumeClaim: { claimName: claim, ...(m.read_only ? { readOnly: true } : {}) } };
    return { volume, mount: { name, mountPath: m.container, ...(m.read_only ? { readOnly: true } : {}) } };
  });
}
