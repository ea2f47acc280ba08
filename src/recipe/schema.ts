import * as z from "zod";
import { DEFAULT_ENGINE, ENGINE_NAMES } from "../engine/registry.js";
import { GGUF_PATH_MAX_CHARS, REPO_FILE_PATTERN } from "../engine/hf-snapshot.js";

/**
 * The recipe file format: one source for every key's type, default and description. Every key
 * is optional here because a variant (`extends`) may leave any of them to its parent;
 * `REQUIRED_RECIPE_KEYS` are checked once the chain is resolved.
 */
const mountSchema = z.strictObject({
  host: z.string().meta({ description: "Path on the node. `~` is the home of the SSH user on that node." }),
  container: z.string().meta({ description: "Absolute path inside the container." }),
  read_only: z.boolean().optional().meta({ description: "Mount read-only (`:ro`).", default: false }),
  env: z
    .string()
    .optional()
    .meta({ description: "Name of an env var the container gets, set to the container path (e.g. HF_HOME)." }),
});

/**
 * A GGUF file of a Hub repo, as a path in its snapshot: a repo's file by the one rule
 * (REPO_FILE_PATTERN) ending in .gguf, of at most GGUF_PATH_MAX_CHARS (every part of a split file
 * is a word of one command line).
 */
const ggufPath = z
  .string()
  .max(GGUF_PATH_MAX_CHARS, { error: `a GGUF path is at most ${GGUF_PATH_MAX_CHARS} characters` })
  .regex(new RegExp(`^${REPO_FILE_PATTERN}\\.gguf$`), { error: "a GGUF file is a path in the repo ending in .gguf, with no `.`, `..` or empty part and no leading / or -" });

const ggufSchema = z.strictObject({
  file: ggufPath.meta({ description: "The model's GGUF file in the repo (of a split file, its first part: NAME-00001-of-0000N.gguf)." }),
  mmproj: ggufPath.optional().meta({ description: "The vision projector's GGUF file in the repo, which the engine loads beside the model." }),
  revision: z
    .string()
    .regex(/^[0-9a-f]{40}$/, { error: "revision is the repo's 40-hex commit (the snapshot folder the files are in)" })
    .meta({ description: "The repo's commit (40 hex): the snapshot folder the head's --model names." }),
});

export const recipeFileSchema = z
  .strictObject({
    extends: z
      .string()
      .optional()
      .meta({ description: "Parent recipe (a name under recipes/, or a path): this recipe is the parent plus its own keys." }),
    // The engines' names come from the registry: a new engine's folder adds its name here too.
    engine: z.enum(ENGINE_NAMES).optional().meta({ description: "Inference engine.", default: DEFAULT_ENGINE }),
    name: z.string().optional().meta({ description: "Human-readable name of the recipe." }),
    docker_image: z.string().optional().meta({ description: "Docker image every node runs (same image ID on all nodes)." }),
    docker_image_dir: z
      .string()
      .optional()
      .meta({ description: "Folder under docker-images/ whose Dockerfile builds docker_image." }),
    model: z.string().optional().meta({ description: "Model to serve (Hugging Face id); the first word of the container command." }),
    gguf: ggufSchema.optional().meta({ description: "The GGUF files of the Hub repo `model` to serve, for an engine that reads GGUF files (the first part of a split file; every part, and mmproj, are read beside it). `models pull` and `models sync` move only these files, and the head's model is the file in the HF_HOME mount's snapshot of `revision`." }),
    required_nodes: z.number().int().min(1).optional().meta({ description: "Number of nodes the recipe runs on.", default: 1 }),
    tensor_parallel_size: z.number().int().min(1).optional().meta({ description: "Tensor parallel size (launcher passes it to the engine).", default: 1 }),
    pipeline_parallel_size: z.number().int().min(1).optional().meta({ description: "Pipeline parallel size (launcher passes it to the engine).", default: 1 }),
    distributed_backend: z
      .enum(["mp", "ray"])
      .optional()
      .meta({ description: "Multi-node backend: the engine's own multiprocessing (mp) or Ray.", default: "mp" }),
    shm_size: z.string().optional().meta({ description: "Docker --shm-size for every container (e.g. 32gb).", default: "32gb" }),
    entrypoint: z
      .union([z.string(), z.array(z.string())], { error: "entrypoint must be a string or an array of strings" })
      .optional()
      .meta({ description: "Replaces the image's ENTRYPOINT; the command stays model + flags. Unset: the image's own (the engine's serve command)." }),
    args: z
      .array(z.string())
      .optional()
      .meta({ description: "Engine flags, as shell words (JSON inside single quotes). Launcher-managed flags are not allowed.", default: [] }),
    remove_args: z
      .array(z.string())
      .optional()
      .meta({ description: "Flags of the parent recipe to drop (with their values).", default: [] }),
    env: z
      .record(z.string(), z.string({ error: "env values must be strings (quote numbers: KEY = \"1\")" }))
      .optional()
      .meta({ description: "Environment of every container (strings). Fabric env is launcher-managed.", default: {} }),
    unsafe_dev_routes: z
      .boolean()
      .optional()
      .meta({ description: "Allow the env switches (in [env], or a mount's env) that open the engine's admin or development routes, which its API key may not guard; `launcher validate` names each switch it finds. Off: such a switch is an error.", default: false }),
    remove_env: z.array(z.string()).optional().meta({ description: "Env keys of the parent recipe to drop.", default: [] }),
    extra_mounts: z
      .array(mountSchema)
      .optional()
      .meta({ description: "Bind mounts for every container; a variant's mount replaces the parent's with the same container path.", default: [] }),
    remove_mounts: z
      .array(z.string())
      .optional()
      .meta({ description: "Container paths of the parent's mounts to drop.", default: [] }),
  })
  .meta({
    title: "launcher recipe",
    description: "recipes/<name>/recipe.toml: what a deployment runs. See the launcher README.",
  });

export type RecipeFile = z.infer<typeof recipeFileSchema>;
export type RecipeMount = z.infer<typeof mountSchema>;
export type RecipeGguf = z.infer<typeof ggufSchema>;

export const RECIPE_KEYS = Object.keys(recipeFileSchema.shape);
export const MOUNT_KEYS = Object.keys(mountSchema.shape);
export const REQUIRED_RECIPE_KEYS = ["name", "docker_image", "model"] as const;

export function recipeJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(recipeFileSchema, { target: "draft-7", io: "input" }) as Record<string, unknown>;
  // A variant may leave the required keys to its parent, so they are required only without `extends`.
  return { ...schema, anyOf: [{ required: ["extends"] }, { required: [...REQUIRED_RECIPE_KEYS] }] };
}
