import { UserError } from "../config/errors.js";
import { parseDuration } from "../config/duration.js";
import { DEFAULT_LISTEN, DEFAULTS } from "../contract/defaults.js";
import { collectKeys, type KeyWords } from "../gateway/auth.js";
import { MAX_CAPTURE_BYTES } from "../gateway/capture.js";
import { isLoopback, parseListen, type ListenAddress } from "../gateway/listen.js";

/** `launcher serve`'s flags as commander gives them: each default is SERVE_DEFAULTS's. */
export interface ServeFlags {
  listen?: string;
  cluster?: string[];
  apiKey?: string[];
  apiKeyFile?: string;
  poll?: string;
  restartBackoff?: string;
  upstreamTimeout?: string;
  idleTimeout?: string;
  control?: boolean;
  adminKeyFile?: string;
  captureBodies?: string;
  probeEvery?: string;
  probeBound?: string;
}

/** The defaults of serve's flags as written on its command line (src/contract/defaults.ts says each): `--help` shows them and daemonConfig applies them. */
export const SERVE_DEFAULTS = {
  listen: DEFAULT_LISTEN,
  poll: DEFAULTS.poll.text,
  restartBackoff: DEFAULTS.restartBackoff.text,
  upstreamTimeout: DEFAULTS.upstreamTimeout.text,
  idleTimeout: DEFAULTS.idleTimeout.text,
  probeEvery: DEFAULTS.probeEvery.text,
  probeBound: DEFAULTS.probeBound.text,
} as const;

/** What a daemon runs with: every flag of serve checked and turned into values. */
export interface DaemonConfig {
  /** The address to listen on, and --listen as given (its errors quote it). */
  readonly listen: ListenAddress;
  readonly listenText: string;
  /** The inference keys (none: loopback only). */
  readonly apiKeys: readonly string[];
  /** Whether the control API is served, and its admin keys (none: its own user's socket only). */
  readonly control: boolean;
  readonly adminKeys: readonly string[];
  /** The cluster files named (--cluster, else the one found), in order: the first is the default. */
  readonly clusterFiles: readonly string[];
  readonly pollMs: number;
  readonly restartBackoffMs: number;
  readonly upstreamTimeoutMs: number;
  readonly idleTimeoutMs: number;
  /** With no generation completed for this long, a serving deployment is probed (src/supervise/generation.ts). */
  readonly probeEveryMs: number;
  /** A probe not completed by then: its deployment is wedged. */
  readonly probeBoundMs: number;
  /** How many bytes of each request's and answer's body the activity log keeps (keys removed); 0: none. */
  readonly captureBodies: number;
}

/** What daemonConfig reads besides the flags: the environment's keys, and files by path. */
export interface ConfigReaders {
  /** A file's text; its errors name `what` (src/config/read-file.ts readTextFile). */
  readonly readFile: (file: string, what: string) => string;
  /** The cluster file `--cluster option` names (or the one found), or a UserError (src/app/lookup.ts clusterPath). */
  readonly clusterPath: (option: string | undefined) => string;
}

/** The admin keys' words in collectKeys's errors: the same problems as the inference keys', said of them. */
export const ADMIN_KEY_WORDS: KeyWords = { env: "LAUNCHER_ADMIN_KEY", file: "admin key file" };

/** --capture-bodies: a count of bytes, 0 (off) to MAX_CAPTURE_BYTES; absent: off. */
function captureBytes(text: string | undefined): number {
  if (text === undefined) return 0;
  const bytes = /^\d{1,9}$/.test(text) ? Number(text) : Number.NaN;
  if (!(bytes <= MAX_CAPTURE_BYTES)) throw new UserError(`--capture-bodies ${text} is not a count of bytes from 0 to ${MAX_CAPTURE_BYTES}`, `for example --capture-bodies 4096 keeps the first 4 KiB of each body; 0 or no flag captures none`);
  return bytes;
}

/** A duration that must pass: a probe bound of zero would call every deployment wedged, a period of zero probe without end. */
function aboveZero(text: string, flag: string): number {
  const ms = parseDuration(text, flag);
  if (ms <= 0) throw new UserError(`${flag} ${text} is no time`, `give it a duration above zero, e.g. ${flag === "--probe-every" ? SERVE_DEFAULTS.probeEvery : SERVE_DEFAULTS.probeBound}`);
  return ms;
}

/** The inference keys: --api-key (each), $LAUNCHER_API_KEY and --api-key-file. */
function apiKeys(flags: ServeFlags, env: Readonly<Record<string, string | undefined>>, read: ConfigReaders): string[] {
  const file = flags.apiKeyFile === undefined ? undefined : { path: flags.apiKeyFile, text: read.readFile(flags.apiKeyFile, "API key file") };
  return collectKeys({ flags: flags.apiKey ?? [], env: env.LAUNCHER_API_KEY, ...(file === undefined ? {} : { file }) });
}

/**
 * The admin keys of the control API: $LAUNCHER_ADMIN_KEY (comma-separated) or --admin-key-file;
 * never a flag holding the key itself, which `ps` would show.
 */
function adminKeys(flags: ServeFlags, env: Readonly<Record<string, string | undefined>>, read: ConfigReaders): string[] {
  const file = flags.adminKeyFile === undefined ? undefined : { path: flags.adminKeyFile, text: read.readFile(flags.adminKeyFile, ADMIN_KEY_WORDS.file) };
  return collectKeys({ flags: [], env: env[ADMIN_KEY_WORDS.env], words: ADMIN_KEY_WORDS, ...(file === undefined ? {} : { file }) });
}

/**
 * serve's flags -> the daemon's config, or the first UserError, in this order: the address, the
 * keys (their files read, and who may listen where), every duration, and last the cluster files'
 * paths (looked up, not read: the daemon reads them as it starts). So each flag's own value is
 * judged before anything is looked for on disk but the key files it names. Reads only through
 * `read` and `env`.
 */
export function daemonConfig(flags: ServeFlags, env: Readonly<Record<string, string | undefined>>, read: ConfigReaders): DaemonConfig {
  const listenText = flags.listen ?? SERVE_DEFAULTS.listen;
  const listen = parseListen(listenText);
  if (listen === undefined) throw new UserError(`--listen ${listenText} is not HOST:PORT`, "for example 127.0.0.1:8080 or 0.0.0.0:8080");
  const keys = apiKeys(flags, env, read);
  if (keys.length === 0 && !isLoopback(listen.host)) {
    throw new UserError(`refusing to listen on ${listen.host} without an API key: anyone on that network could use the cluster`, "pass --api-key-file FILE (or set LAUNCHER_API_KEY), or listen on 127.0.0.1");
  }
  // Without an admin key the control API answers its own user's socket only, never TCP.
  const admin = flags.control === true ? adminKeys(flags, env, read) : [];
  // A client that may chat must not be able to launch containers: the two kinds of key never meet.
  if (admin.some((k) => keys.includes(k))) throw new UserError("an admin key is also an inference key", "give the control API a key of its own (--admin-key-file / LAUNCHER_ADMIN_KEY)");
  const durations = {
    pollMs: parseDuration(flags.poll ?? SERVE_DEFAULTS.poll, "--poll"),
    restartBackoffMs: parseDuration(flags.restartBackoff ?? SERVE_DEFAULTS.restartBackoff, "--restart-backoff"),
    upstreamTimeoutMs: parseDuration(flags.upstreamTimeout ?? SERVE_DEFAULTS.upstreamTimeout, "--upstream-timeout"),
    idleTimeoutMs: parseDuration(flags.idleTimeout ?? SERVE_DEFAULTS.idleTimeout, "--idle-timeout"),
    probeEveryMs: aboveZero(flags.probeEvery ?? SERVE_DEFAULTS.probeEvery, "--probe-every"),
    probeBoundMs: aboveZero(flags.probeBound ?? SERVE_DEFAULTS.probeBound, "--probe-bound"),
  };
  const captureBodies = captureBytes(flags.captureBodies);
  const clusterFiles = (flags.cluster ?? [undefined]).map((f) => read.clusterPath(f));
  return { listen, listenText, apiKeys: keys, control: flags.control === true, adminKeys: admin, clusterFiles, ...durations, captureBodies };
}
