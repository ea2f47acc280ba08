/** One folder under docker-images/: what it builds and what its Dockerfile starts from. */
export interface ImageFolder {
  readonly name: string;
  readonly path: string;
  /** The image it builds: `<folder>:local`, or the recipe's docker_image for the recipe's own folder. */
  readonly tag: string;
  readonly dockerfile: string;
}

/** The images a Dockerfile's stages start FROM, without `scratch` and without its own stage names. */
export function fromImages(dockerfile: string): string[] {
  const stages = new Set<string>();
  const out: string[] = [];
  // Line continuations join before parsing, as Docker does.
  for (const line of dockerfile.replace(/\\\r?\n/g, " ").split(/\r?\n/)) {
    const m = /^\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?/i.exec(line);
    if (!m) continue;
    const image = m[1] as string;
    if (image !== "scratch" && !stages.has(image.toLowerCase()) && !out.includes(image)) out.push(image);
    if (m[2] !== undefined) stages.add(m[2].toLowerCase());
  }
  return out;
}

export type BuildOrder = { readonly ok: true; readonly steps: readonly ImageFolder[] } | { readonly ok: false; readonly message: string; readonly hint: string };

/**
 * The folders to build, bases first, for `target`. A base is built only when the build node
 * lacks it and one of our folders builds it; a base that is neither there nor buildable is an
 * error naming it.
 */
export function buildOrder(target: ImageFolder, folders: readonly ImageFolder[], present: ReadonlySet<string>, where: string): BuildOrder {
  const steps: ImageFolder[] = [];
  const visiting: string[] = [];
  const visit = (f: ImageFolder): BuildOrder | undefined => {
    if (visiting.includes(f.name)) return { ok: false, message: `docker-images/${f.name} builds FROM itself through ${[...visiting, f.name].join(" -> ")}`, hint: "break the FROM cycle" };
    visiting.push(f.name);
    for (const base of fromImages(f.dockerfile)) {
      if (present.has(base) || steps.some((s) => s.tag === base)) continue;
      const builder = folders.find((x) => x.tag === base);
      if (builder === undefined) {
        return {
          ok: false,
          message: `docker-images/${f.name}/Dockerfile starts FROM ${base}, which is not on ${where} and which no docker-images/ folder builds`,
          hint: `load ${base} on ${where} (docker load, or docker pull where a registry is reachable), or add docker-images/${base.split(":")[0] ?? base}/ to build it`,
        };
      }
      const failed = visit(builder);
      if (failed !== undefined) return failed;
    }
    visiting.pop();
    if (!steps.includes(f)) steps.push(f);
    return undefined;
  };
  return visit(target) ?? { ok: true, steps };
}
