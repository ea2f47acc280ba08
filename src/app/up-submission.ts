import * as z from "zod";
import { MAX_CHAIN } from "../recipe/resolve.js";

/*
 * `up` as submitted: the request of the daemon's control API (POST boots, src/daemon/protocol.ts
 * has its routes), which the CLI also builds for its own process (src/cli/up.ts). Read by
 * prepareUp (./prepare-up.ts) either way, and admitted for a client by ./admit.ts.
 */

/** A recipe file the client read (src/recipe/uploaded-source.ts `RecipeLookup`), sent for a daemon that cannot read it. */
const RecipeLookupSchema = z.strictObject({ ref: z.string().min(1), from: z.string().optional(), file: z.string().min(1), id: z.string(), text: z.string() });

/**
 * The most bytes of a cluster file's base name: the daemon keeps the file under it (with ".toml"
 * added when missing), and Linux refuses names past NAME_MAX, 255 bytes (include/uapi/linux/limits.h).
 */
export const MAX_CLUSTER_FILE_NAME_BYTES = 250;

/** The base name of a client's path: what follows its last "/" ("" for a path ending in one). */
export const clientBaseName = (file: string): string => file.slice(file.lastIndexOf("/") + 1);

/**
 * Why a client's cluster file path cannot name a file the daemon keeps, or undefined. Its base name
 * becomes the kept file's name (and the cluster's, when the file sets none: src/cluster/parse.ts),
 * so it must be one plain name: not empty, `.` or `..`, no control characters (the path is quoted
 * in diagnostics too), within NAME_MAX.
 */
export function clusterFileNameProblem(file: string): string | undefined {
  const base = clientBaseName(file);
  if (/[\x00-\x1f\x7f]/.test(file)) return "has control characters";
  if (base === "" || base === "." || base === "..") return `does not end in a file name (its last part is ${JSON.stringify(base)})`;
  if (Buffer.byteLength(base) > MAX_CLUSTER_FILE_NAME_BYTES) return `has a file name longer than ${MAX_CLUSTER_FILE_NAME_BYTES} bytes`;
  return undefined;
}

const ClusterFileNameSchema = z.string().min(1).max(4096).superRefine((file, ctx) => {
  const problem = clusterFileNameProblem(file);
  if (problem !== undefined) ctx.addIssue({ code: "custom", message: `the cluster file's path ${problem}: send a file by its own name (launcher up --cluster FILE.toml)` });
});

/**
 * `up`'s flags as the client was given them: the daemon parses them as the CLI would, so errors
 * read alike. With them, the files the client read: `recipes` (the recipe and its `extends`
 * parents) and `cluster_file` (when --cluster named one), so that a daemon on another machine
 * boots what the client saw and names the client's files in its diagnostics.
 */
export const UpSubmissionSchema = z.strictObject({
  ref: z.string().min(1),
  cluster: z.string().optional(),
  lane: z.string().optional(),
  name: z.string().optional(),
  nodes: z.string().optional(),
  port: z.string().optional(),
  timeout: z.string().optional(),
  drain: z.string().optional(),
  push: z.boolean().optional(),
  drop_caches: z.boolean().optional(),
  restart: z.string().optional(),
  recipes: z.array(RecipeLookupSchema).max(MAX_CHAIN).optional(),
  cluster_file: z.strictObject({ file: ClusterFileNameSchema, text: z.string() }).optional(),
});

export type UpSubmission = z.infer<typeof UpSubmissionSchema>;
