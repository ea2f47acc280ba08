import path from "node:path";
import type { RecipeSource } from "../../src/recipe/resolve.js";

/** Recipes held in memory, named `recipes/<id>/recipe.toml`, for tests of the pure core. */
export function memorySource(files: Record<string, string>): RecipeSource {
  return {
    find(ref, from) {
      const candidates = ref.includes("/")
        ? [path.normalize(from === undefined ? ref : path.join(path.dirname(from), ref))]
        : [`recipes/${ref}/recipe.toml`];
      for (const c of candidates) {
        const file = c.endsWith(".toml") ? c : `${c}/recipe.toml`;
        const text = files[file];
        if (text !== undefined) return { file, id: path.basename(path.dirname(file)), text };
      }
      return { error: `recipe "${ref}" not found` };
    },
  };
}

export const BASE = `
engine = "vllm"
name = "base"
docker_image = "img:local"
model = "org/model"
required_nodes = 2
tensor_parallel_size = 2
pipeline_parallel_size = 1
distributed_backend = "mp"
shm_size = "32gb"
args = [
    "--served-model-name", "served",
    "--max-model-len", "4096",
    "--enable-prefix-caching",
]
[env]
HF_HUB_OFFLINE = "1"
`;
