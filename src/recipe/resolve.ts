import { createHash } from "node:crypto";
import { error, hasErrors, warning, type Diagnostic, type Loc } from "../config/diagnostic.js";
import { UserError } from "../config/errors.js";
import { splitShellWords } from "../config/shell-words.js";
import { parseTomlDocument, type TomlDocument } from "../config/toml-document.js";
import type { FlagCondition, GgufFiles } from "../engine/adapter.js";
import { adapterOrDefault } from "../engine/registry.js";
import { engineInputDiagnostics, findAnyFlag, findFlag, flagKey, flagsOfWords, type Flag } from "./args.js";
import { checkRecipeFile, type CheckedFile, type FlagsFor } from "./check-file.js";
import { engineUseDiagnostics } from "./engine-use.js";
import type { Mount, Origins, Recipe } from "./recipe.js";
import { recipeFileSchema, REQUIRED_RECIPE_KEYS, type RecipeFile } from "./schema.js";

export interface FoundRecipe {
  readonly file: string;
  readonly id: string;
  readonly text: string;
}

/** Where recipes come from: the file system in the CLI, a table in tests. */
export interface RecipeSource {
  /** `from` is the file whose `extends` names `ref`, so that relative paths resolve from it. */
  find(ref: string, from?: string): FoundRecipe | { error: string };
}

export interface Resolved {
  readonly recipe?: Recipe;
  /** The engine the chain names, also when the recipe has errors (what judged its args). */
  readonly engine?: Recipe["engine"];
  readonly origins: Origins;
  readonly diagnostics: Diagnostic[];
}

/** The image folders a recipe's `docker_image_dir` may name: the folders found, and where they were looked for. */
export interface ImageFolders {
  readonly roots: readonly string[];
  readonly names: readonly string[];
}

export interface ResolveOptions {
  /** GPUs per node, to check that the parallel sizes fit (a DGX Spark has one). */
  readonly gpusPerNode?: number;
  /** The `docker-images/` folders there are, to warn about a `docker_image_dir` naming none (unchecked when absent). */
  readonly imageFolders?: ImageFolders;
  /** Judge an engine's args by this table (an image's own parser) rather than the engine's own. */
  readonly flagsFor?: FlagsFor;
}

interface Layer {
  readonly found: FoundRecipe;
  readonly doc: TomlDocument;
  readonly checked: CheckedFile;
}

interface ArgEntry {
  readonly key: string;
  readonly words: readonly string[];
  readonly loc: Loc;
}

/** The longest `extends` chain read (and so the most recipe files a submission carries). */
export const MAX_CHAIN = 32;

function loadChain(ref: string, source: RecipeSource, diagnostics: Diagnostic[], flagsFor?: FlagsFor): Layer[] | undefined {
  const read: { found: FoundRecipe; doc: TomlDocument }[] = [];
  const broken: Diagnostic[] = [];
  let next: { ref: string; from?: string; at?: Loc } | undefined = { ref };
  const seen = new Set<string>();
  while (next !== undefined && read.length < MAX_CHAIN) {
    const found = source.find(next.ref, next.from);
    if ("error" in found) {
      broken.push(
        next.at === undefined
          ? error({ file: next.ref, line: 1, col: 1 }, found.error)
          : error(next.at, `extends: ${found.error}`, "name a recipe under recipes/ or give a path to its recipe.toml"),
      );
      break;
    }
    if (seen.has(found.file)) {
      const cycle = [...read.map((l) => l.found.id), found.id].join(" -> ");
      broken.push(error(next.at ?? { file: found.file, line: 1, col: 1 }, `extends makes a cycle: ${cycle}`));
      break;
    }
    seen.add(found.file);
    const parsed = parseTomlDocument(found.file, found.text);
    if (!parsed.ok) {
      broken.push(...parsed.diagnostics);
      break;
    }
    read.push({ found, doc: parsed.doc });
    const parent = parsed.doc.value.extends;
    next = typeof parent === "string" ? { ref: parent, from: found.file, at: parsed.doc.locate(["extends"]) } : undefined;
  }
  if (next !== undefined && broken.length === 0) broken.push(error({ file: ref, line: 1, col: 1 }, `extends chain is longer than ${MAX_CHAIN} recipes`));
  // Every file's args are read as the chain's engine's (the nearest file that names one): a file
  // that only extends an SGLang recipe holds SGLang's flags.
  const engine = read.map((r) => r.doc.value.engine).find((e): e is string => typeof e === "string");
  const layers = read.map(({ found, doc }) => ({ found, doc, checked: checkRecipeFile(doc, flagsFor, engine) }));
  for (const l of layers) diagnostics.push(...l.checked.diagnostics);
  diagnostics.push(...broken);
  return broken.length > 0 ? undefined : layers;
}

function argEntries(layer: Layer): ArgEntry[] {
  const { flags, stray } = layer.checked;
  const loc = (element: number): Loc => layer.doc.locate(["args", element]);
  const entries: ArgEntry[] = flags.map((f) => ({
    key: flagKey(f.name),
    words: [f.name, ...f.values],
    loc: loc(f.element),
  }));
  stray.forEach((w, i) => entries.push({ key: `#${layer.found.file}#${i}`, words: [w.word], loc: loc(w.element) }));
  return entries.sort((a, b) => a.loc.line - b.loc.line || a.loc.col - b.loc.col);
}

type Scalars = Omit<RecipeFile, "args" | "env" | "extra_mounts" | "remove_args" | "remove_env" | "remove_mounts" | "extends">;
const SCALAR_KEYS = Object.keys(recipeFileSchema.shape).filter(
  (k) => !["args", "env", "extra_mounts", "remove_args", "remove_env", "remove_mounts", "extends"].includes(k),
) as (keyof Scalars)[];

const defaultOf = (key: keyof typeof recipeFileSchema.shape): unknown =>
  (recipeFileSchema.shape[key].meta() as { default?: unknown } | undefined)?.default;

/** Resolves a recipe reference into a full recipe: reads the extends chain, merges and checks it. */
export function resolveRecipe(ref: string, source: RecipeSource, options: ResolveOptions = {}): Resolved {
  const diagnostics: Diagnostic[] = [];
  const origins = new Map<string, Loc>();
  const chain = loadChain(ref, source, diagnostics, options.flagsFor);
  if (chain === undefined) return { origins, diagnostics };
  const self = chain[0] as Layer;

  const scalars: Record<string, unknown> = {};
  let args: ArgEntry[] = [];
  const env = new Map<string, string>();
  const mounts = new Map<string, Mount>();

  for (const layer of [...chain].reverse()) {
    const v = layer.checked.value;
    const isRoot = layer === chain[chain.length - 1];
    for (const key of SCALAR_KEYS) {
      if (v[key] === undefined) continue;
      scalars[key] = v[key];
      origins.set(key, layer.doc.locate([key]));
    }
    for (const flag of v.remove_args ?? []) {
      const key = flagKey(flag);
      if (!args.some((a) => a.key === key) && !isRoot) {
        diagnostics.push(warning(layer.doc.locate(["remove_args"]), `remove_args: ${flag} is not in the parent recipe's args`));
      }
      args = args.filter((a) => a.key !== key);
    }
    for (const entry of argEntries(layer)) {
      const at = args.findIndex((a) => a.key === entry.key);
      if (at < 0) {
        args.push(entry);
      } else {
        args[at] = entry;
        args = args.filter((a, i) => i <= at || a.key !== entry.key);
      }
    }
    for (const key of v.remove_env ?? []) {
      if (!env.has(key) && !isRoot) diagnostics.push(warning(layer.doc.locate(["remove_env"]), `remove_env: ${key} is not in the parent recipe's env`));
      env.delete(key);
    }
    for (const [key, value] of Object.entries(v.env ?? {})) {
      env.set(key, value);
      origins.set(`env:${key}`, layer.doc.locate(["env", key]));
    }
    for (const path of v.remove_mounts ?? []) {
      if (!mounts.has(path) && !isRoot) diagnostics.push(warning(layer.doc.locate(["remove_mounts"]), `remove_mounts: no parent mount at ${path}`));
      mounts.delete(path);
    }
    (v.extra_mounts ?? []).forEach((m, i) => {
      if (typeof m?.container !== "string" || typeof m.host !== "string") return;
      const mount: Mount = m.env === undefined ? { host: m.host, container: m.container, read_only: m.read_only ?? false } : { host: m.host, container: m.container, read_only: m.read_only ?? false, env: m.env };
      mounts.set(m.container, mount);
      origins.set(`mount:${m.container}`, layer.doc.locate(["extra_mounts", i]));
    });
  }
  for (const a of args) origins.set(`args:${a.key}`, a.loc);

  const top: Loc = { file: self.found.file, line: 1, col: 1 };
  const invalid = new Set(chain.flatMap((l) => [...l.checked.invalidKeys]));
  for (const key of REQUIRED_RECIPE_KEYS) {
    if (scalars[key] === undefined && !invalid.has(key)) {
      diagnostics.push(error(top, `missing required key "${key}"`, `add ${key} = "..." at the top of the file${chain.length > 1 ? " or in its parent" : ""}`));
    }
  }
  const pick = <T>(key: keyof Scalars): T => (scalars[key] ?? defaultOf(key)) as T;
  const words = args.flatMap((a) => a.words);
  const entrypoint = scalars.entrypoint as string | string[] | undefined;
  const entrypointWords =
    entrypoint === undefined ? undefined : typeof entrypoint === "string" ? (() => { const s = splitShellWords(entrypoint); return s.ok ? s.words : [entrypoint]; })() : entrypoint;

  const recipe: Recipe = {
    id: self.found.id,
    file: self.found.file,
    chain: chain.map((l) => l.found.file),
    engine: pick("engine"),
    name: pick("name") ?? "",
    docker_image: pick("docker_image") ?? "",
    ...(scalars.docker_image_dir === undefined ? {} : { docker_image_dir: scalars.docker_image_dir as string }),
    model: pick("model") ?? "",
    ...(scalars.gguf === undefined ? {} : { gguf: scalars.gguf as GgufFiles }),
    required_nodes: pick("required_nodes"),
    tensor_parallel_size: pick("tensor_parallel_size"),
    pipeline_parallel_size: pick("pipeline_parallel_size"),
    distributed_backend: pick("distributed_backend"),
    shm_size: pick("shm_size"),
    ...(entrypointWords === undefined ? {} : { entrypoint: entrypointWords }),
    args: words,
    env: Object.fromEntries([...env.entries()]),
    ...(scalars.unsafe_dev_routes === undefined ? {} : { unsafe_dev_routes: scalars.unsafe_dev_routes as boolean }),
    extra_mounts: [...mounts.values()],
  };
  diagnostics.push(...checkResolved(recipe, origins, top, options, invalid));
  diagnostics.push(...checkImageDir(recipe, origins.get("docker_image_dir") ?? top, options.imageFolders));
  diagnostics.push(...weightFilesDiagnostics(recipe, origins.get("gguf") ?? top));
  return hasErrors(diagnostics) ? { origins, diagnostics, engine: recipe.engine } : { recipe, origins, diagnostics, engine: recipe.engine };
}

/**
 * A `docker_image_dir` with no folder under `docker-images/` is a warning, not an error: the
 * image may already be on the nodes (the seeds' image folders are not in this repository), but
 * `launcher images build` cannot make it and `up` cannot help when a node lacks it.
 */
function checkImageDir(recipe: Recipe, at: Loc, folders: ImageFolders | undefined): Diagnostic[] {
  const dir = recipe.docker_image_dir;
  if (dir === undefined || folders === undefined || folders.names.includes(dir)) return [];
  const where = folders.roots.length === 0 ? "" : ` (looked in ${folders.roots.join(", ")})`;
  return [
    warning(
      at,
      `docker_image_dir "${dir}" names no folder with a Dockerfile under docker-images/${where}`,
      `to build the image with launcher images build, put its Dockerfile in docker-images/${dir}/ (or in a folder on $LAUNCHER_DOCKER_IMAGES); otherwise the image ${recipe.docker_image} must already be on the nodes (launcher images ${recipe.id} shows where it is)`,
    ),
  ];
}

/**
 * The files of the model's repo the engine reads, when the recipe names them (llama.cpp's `gguf`):
 * what the adapter refuses of them (a later part of a split file, no HF cache mounted, a model
 * that is no repo) is an error at `validate`, not first at `plan`.
 */
function weightFilesDiagnostics(recipe: Recipe, at: Loc): Diagnostic[] {
  try {
    adapterOrDefault(recipe.engine).weightFiles?.(recipe);
    return [];
  } catch (e) {
    if (!(e instanceof UserError)) throw e;
    return [error(at, e.message, e.hint)];
  }
}

function checkResolved(recipe: Recipe, origins: Origins, top: Loc, options: ResolveOptions, invalid: ReadonlySet<string>): Diagnostic[] {
  const out: Diagnostic[] = [];
  const at = (key: string): Loc => origins.get(key) ?? top;
  const engine = adapterOrDefault(recipe.engine);
  const table = options.flagsFor?.(engine.name) ?? engine.flags;
  const flags = flagsOfWords(recipe.args, table);
  const flagAt = (f: Flag): Loc => at(`args:${flagKey(f.name)}`);
  const gpus = options.gpusPerNode ?? 1;
  const tp = recipe.tensor_parallel_size;
  const pp = recipe.pipeline_parallel_size;
  const world = recipe.required_nodes * gpus;
  const sizesValid = !["required_nodes", "tensor_parallel_size", "pipeline_parallel_size"].some((k) => invalid.has(k));
  // Sizes beside TP and PP that multiply the ranks (vLLM: data parallel, prefill context parallel).
  const extra: { key: string; flag: Flag; size: number }[] = [];
  // A parallel-size flag's value: a positive integer, else an error at the flag (and undefined).
  const sizeOf = (flag: Flag): number | undefined => {
    const size = Number(flag.value);
    if (Number.isInteger(size) && size >= 1) return size;
    out.push(error(flagAt(flag), `${flag.name} must be a positive integer, not ${JSON.stringify(flag.value ?? "")}`));
    return undefined;
  };
  // A rule that depends on another flag of the args (EngineFlags' `when`).
  const holds = (when: FlagCondition | undefined): boolean =>
    when === undefined || ((when.with === undefined || findAnyFlag(flags, when.with) !== undefined) && (when.without === undefined || findAnyFlag(flags, when.without) === undefined));
  for (const w of table.worldSize.filter((x) => holds(x.when))) {
    const flag = findAnyFlag(flags, w.flags);
    const size = flag === undefined ? undefined : sizeOf(flag);
    if (flag !== undefined && size !== undefined) extra.push({ key: w.key, flag, size });
  }
  const ranks = extra.reduce((n, e) => n * e.size, tp * pp);
  if (sizesValid && ranks !== world) {
    const names = ["tensor_parallel_size", "pipeline_parallel_size", ...extra.map((e) => `${e.key} (${e.flag.name})`)];
    const sizes = [tp, pp, ...extra.map((e) => e.size)];
    out.push(
      error(
        extra.length > 0 && tp * pp === world ? flagAt((extra[0] as { flag: Flag }).flag) : at("tensor_parallel_size"),
        `${names.join(" x ")} = ${sizes.join(" x ")} = ${ranks}, but required_nodes x GPUs per node = ${recipe.required_nodes} x ${gpus} = ${world}`,
        "every GPU of the deployment holds one rank: make the product of the parallel sizes equal the number of GPUs",
      ),
    );
  }
  const model = findAnyFlag(flags, table.model);
  if (model !== undefined) {
    const where = origins.get("model");
    out.push(
      error(
        flagAt(model),
        `${model.name} ${model.value ?? ""}: launcher passes the recipe's model ${JSON.stringify(recipe.model)}${where === undefined ? "" : ` (line ${where.line})`} to the engine as its model; a second one stops its parser`,
        `remove ${model.name}; set model = ${JSON.stringify(model.value ?? recipe.model)} in the recipe`,
      ),
    );
  }
  if (recipe.required_nodes > 1) {
    for (const single of table.singleNode.filter((x) => holds(x.when))) {
      const flag = findAnyFlag(flags, single.flags);
      if (flag !== undefined) out.push(error(flagAt(flag), `${flag.name} cannot be used on a multi-node deployment (required_nodes = ${recipe.required_nodes})`, single.instead));
    }
  }
  for (const d of table.dividesTensorParallel.filter((x) => holds(x.when))) {
    const flag = findAnyFlag(flags, d.flags);
    const size = flag === undefined ? undefined : sizeOf(flag);
    if (flag !== undefined && size !== undefined && tp % size !== 0) out.push(error(flagAt(flag), `${flag.name} ${size} does not divide tensor_parallel_size ${tp}`, `the ${d.key} groups split the tensor parallel ranks evenly`));
  }
  out.push(...engineInputDiagnostics(recipe, { ...engine, flags: table }, { flag: flagAt, env: (key) => at(`env:${key}`), mount: (m) => at(`mount:${m.container}`) }));
  out.push(...engineUseDiagnostics(recipe, { key: (key) => origins.get(key), env: (key) => at(`env:${key}`), mount: (m) => at(`mount:${m.container}`) }));
  const backend = findAnyFlag(flags, table.backend);
  if (backend !== undefined && backend.value !== recipe.distributed_backend) {
    out.push(
      error(
        flagAt(backend),
        `${backend.name} ${backend.value ?? ""} disagrees with distributed_backend = "${recipe.distributed_backend}"`,
        "set distributed_backend and drop the flag, or make them agree",
      ),
    );
  }
  return out;
}

/** A short content hash of a resolved recipe: two recipes with the same hash run the same containers. */
export function recipeHash(recipe: Recipe): string {
  const { file: _file, chain: _chain, id: _id, ...content } = recipe;
  return createHash("sha256").update(canonicalJson(content)).digest("hex").slice(0, 12);
}

export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}
