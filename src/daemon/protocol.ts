import { z } from "zod";
import { MAX_CHAIN } from "../recipe/resolve.js";

/**
 * The daemon's control API (on `launcher serve --control`), one typed home for its routes and
 * its request: the server (src/gateway/control.ts) and the client (./client.ts) both use these.
 * Beside the OpenAI routes under /v1, never mixed with them: a key that may chat is not a key that
 * may launch containers.
 */
export const CONTROL_PREFIX = "/launcher/v1/";

export const CONTROL_PATHS = {
  /** POST: submit a boot; the answer streams its events (one JSON object per line) to its end. GET: the boots. */
  boots: `${CONTROL_PREFIX}boots`,
  /** DELETE: cancel a boot in progress (its rollback runs); the answer is its final event. */
  boot: (name: string): string => `${CONTROL_PREFIX}boots/${encodeURIComponent(name)}`,
  /** GET: a boot's events from its start, then each new one until its end. */
  events: (name: string): string => `${CONTROL_PREFIX}boots/${encodeURIComponent(name)}/events`,
} as const;

/** The patterns the server routes, with `{name}` for a boot's deployment name. */
export const CONTROL_ROUTES = {
  boots: `${CONTROL_PREFIX}boots`,
  boot: `${CONTROL_PREFIX}boots/{name}`,
  events: `${CONTROL_PREFIX}boots/{name}/events`,
} as const;

export const NDJSON = "application/x-ndjson";

/** A recipe file the client read (src/recipe/uploaded-source.ts `RecipeLookup`), sent for a daemon that cannot read it. */
const RecipeLookupSchema = z.strictObject({ ref: z.string().min(1), from: z.string().optional(), file: z.string().min(1), id: z.string(), text: z.string() });

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
  restart: z.string().optional(),
  recipes: z.array(RecipeLookupSchema).max(MAX_CHAIN).optional(),
  cluster_file: z.strictObject({ file: z.string().min(1), text: z.string() }).optional(),
});

export type UpSubmission = z.infer<typeof UpSubmissionSchema>;

/** The daemon the CLI finds on this machine when none is named: written by `launcher serve --control`. */
export const LocalDaemonSchema = z.object({ url: z.string(), pid: z.number().int(), host: z.string() });
export type LocalDaemon = z.infer<typeof LocalDaemonSchema>;
