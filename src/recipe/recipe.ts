import type { Loc } from "../config/diagnostic.js";
import type { GgufFiles } from "../engine/adapter.js";
import type { EngineName } from "../engine/registry.js";

export interface Mount {
  readonly host: string;
  readonly container: string;
  readonly read_only: boolean;
  readonly env?: string;
}

/** A recipe with its `extends` chain applied and defaults filled in: what a deployment runs. */
export interface Recipe {
  /** The recipe's folder name (or file stem): how it is named on the command line and in labels. */
  readonly id: string;
  readonly file: string;
  /** Files merged into this recipe, the recipe itself first, its root parent last. */
  readonly chain: readonly string[];
  /** Which adapter in src/engine/registry.ts plans, starts and reads the deployment. */
  readonly engine: EngineName;
  readonly name: string;
  readonly docker_image: string;
  readonly docker_image_dir?: string;
  readonly model: string;
  /** llama.cpp: the GGUF files of the Hub repo `model` (set only when the file says so). */
  readonly gguf?: GgufFiles;
  readonly required_nodes: number;
  readonly tensor_parallel_size: number;
  readonly pipeline_parallel_size: number;
  readonly distributed_backend: "mp" | "ray";
  readonly shm_size: string;
  readonly entrypoint?: readonly string[];
  /** Engine flags as the engine receives them: one element per word, quotes removed. */
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** The recipe allows env switches that open the engine's admin routes (set only when the file says so). */
  readonly unsafe_dev_routes?: boolean;
  readonly extra_mounts: readonly Mount[];
}

/** Where each resolved field was last written, keyed like `tensor_parallel_size` or `args:--flag`. */
export type Origins = ReadonlyMap<string, Loc>;
