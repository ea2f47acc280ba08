import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { readTextFile } from "../config/read-file.js";
import type { ImageFolder } from "./image-build.js";

// Its own module, apart from images.ts: `launcher validate` and `plan` read the folders without
// loading the build and push code (SSH, the transfer chain, the terminal's progress lines).

/** The folders of every docker-images/ root; `own` names the recipe's folder and its image. */
export function imageFolders(roots: readonly string[], own?: { dir: string; tag: string }): ImageFolder[] {
  const out: ImageFolder[] = [];
  for (const root of roots) {
    if (!existsSync(root)) continue;
    for (const name of readdirSync(root).sort()) {
      const dockerfile = path.join(root, name, "Dockerfile");
      if (out.some((f) => f.name === name) || !existsSync(dockerfile)) continue;
      out.push({ name, path: path.join(root, name), tag: own?.dir === name ? own.tag : `${name}:local`, dockerfile: readTextFile(dockerfile, "Dockerfile") });
    }
  }
  return out;
}
