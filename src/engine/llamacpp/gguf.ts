import { UserError } from "../../config/errors.js";
import type { EngineRecipe as Recipe, GgufFiles, WeightFiles } from "../adapter.js";
import { HUB_REPO_ID, snapshotFilePath } from "../hf-snapshot.js";

/**
 * GGUF files split in parts (gguf-split): src/llama.cpp llama_split_path names part i of n
 * "PREFIX-%05d-of-%05d.gguf" (from 1), and src/llama-model-loader.cpp loads a split model only
 * from its first part, finding the others beside it ("illegal split file idx: %d (file: %s),
 * model must be loaded with the first split").
 */
const SPLIT = /-(\d{5})-of-(\d{5})\.gguf$/;

/** The part a GGUF path names and of how many, or undefined for a file in one part. */
export function splitPart(path: string): { readonly part: number; readonly of: number } | undefined {
  const m = SPLIT.exec(path);
  return m === null ? undefined : { part: Number(m[1]), of: Number(m[2]) };
}

/** A later part of a split file named where its first part belongs (`key`: the recipe's key that names it). */
function laterPart(path: string, split: { readonly part: number; readonly of: number }, key: "model" | "file"): { readonly problem: string; readonly fix: string } {
  const first = path.replace(SPLIT, `-00001-of-${String(split.of).padStart(5, "0")}.gguf`);
  return { problem: `${key === "model" ? "the model " : ""}${path} is part ${split.part} of ${split.of} of a split GGUF, and llama.cpp loads a split model only from its first part`, fix: `set ${key} = ${JSON.stringify(first)}: llama.cpp reads the other parts beside it` };
}

/** What is wrong with a model path llama-server is given, or undefined. */
export function modelPathProblem(path: string): { readonly problem: string; readonly fix: string } | undefined {
  const split = splitPart(path);
  return split === undefined || split.part === 1 ? undefined : laterPart(path, split, "model");
}

/**
 * At most this many parts of a split file are named (gguf-split writes %05d; published models come in parts
 * of tens of GB: unsloth's Qwen3-235B-A22B Q4_K_M in 3): every part is a word of the download's command line, which reaches
 * the node as one SSH command, one argument of sh -c there, at most 128 KiB (Linux
 * MAX_ARG_STRLEN, include/uapi/linux/binfmts.h): 128 paths of at most GGUF_PATH_MAX_CHARS (512) stay under.
 */
export const MAX_SPLIT_PARTS = 128;

/**
 * Every file of a GGUF model, from the file a recipe names: the file itself, or each part of a
 * split one named from its first part (llama_split_path: PREFIX-%05d-of-%05d.gguf, from 1).
 * Pure. A later part, or a count past MAX_SPLIT_PARTS, is a problem.
 */
export function ggufParts(file: string): { readonly parts: readonly string[] } | { readonly problem: string; readonly fix: string } {
  const split = splitPart(file);
  if (split === undefined) return { parts: [file] };
  const pad = (n: number): string => String(n).padStart(5, "0");
  const prefix = file.replace(SPLIT, "");
  if (split.part !== 1) return laterPart(file, split, "file");
  if (split.of < 1 || split.of > MAX_SPLIT_PARTS) return { problem: `${file} says it is one of ${split.of} parts`, fix: `name a split GGUF of 1 to ${MAX_SPLIT_PARTS} parts` };
  return { parts: Array.from({ length: split.of }, (_, i) => `${prefix}-${pad(i + 1)}-of-${pad(split.of)}.gguf`) };
}

/** The files of the recipe's `gguf` the head reads: every part of the model, then the projector. */
export function ggufWeightFiles(gguf: GgufFiles): WeightFiles {
  const parts = ggufParts(gguf.file);
  if ("problem" in parts) throw new UserError(`recipe gguf.file: ${parts.problem}`, parts.fix);
  return { files: [...parts.parts, ...(gguf.mmproj === undefined ? [] : [gguf.mmproj])], revision: gguf.revision };
}

/**
 * The head's --model (and --mmproj) as its container sees them: in the snapshot of gguf.revision
 * under the container side of the mount whose env is HF_HOME, where `models pull` and `models
 * sync` put the files on the node (src/engine/hf-snapshot.ts). A recipe without that mount gives
 * the container no cache to read them from.
 */
export function ggufContainerPaths(recipe: Pick<Recipe, "model" | "gguf" | "extra_mounts">): { readonly model: string; readonly mmproj?: string } | undefined {
  const gguf = recipe.gguf;
  if (gguf === undefined) return undefined;
  const home = recipe.extra_mounts?.find((m) => m.env === "HF_HOME")?.container;
  if (home === undefined) {
    throw new UserError(
      "recipe gguf: the GGUF files are in the nodes' Hugging Face cache, which the recipe does not mount",
      'add [[extra_mounts]] host = "~/.cache/huggingface", container = "/root/.cache/huggingface", env = "HF_HOME", read_only = true',
    );
  }
  if (!HUB_REPO_ID.test(recipe.model)) throw new UserError(`recipe model "${recipe.model}": with gguf, model is the Hugging Face repo the GGUF files are in`, "write NAMESPACE/NAME, e.g. unsloth/Qwen3-8B-GGUF, in the recipe's model");
  const at = (file: string): string => snapshotFilePath(home, recipe.model, gguf.revision, file);
  return { model: at(gguf.file), ...(gguf.mmproj === undefined ? {} : { mmproj: at(gguf.mmproj) }) };
}
