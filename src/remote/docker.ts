import * as z from "zod";
import { envFileText } from "../config/env-file.js";
import { RemoteError, UserError } from "../config/errors.js";
import { execChecked, outputTail, unreachable, type ExecResult, type Transport } from "./transport.js";

/** Where `docker run` reads the env file from: the remote command's stdin (SshDocker.run). */
export const ENV_FROM_STDIN = "/dev/stdin";

export interface ContainerInfo {
  readonly id: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly state: string;
  readonly running: boolean;
  readonly exitCode: number;
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly image: string;
}

const PS_FAILED = 97;
// ps and inspect in one remote command: half the SSH round trips of every status poll.
export const LIST_SCRIPT = `ids=$(docker ps --all --quiet --no-trunc --filter "label=$1") || exit ${PS_FAILED}
[ -z "$ids" ] && exit 0
exec docker inspect $ids`;

// The same listing, once `docker stop --time 0` ended the containers named after the label (ones
// already ended or gone are fine): a restart's first look at its old group, in one round trip.
const STOP_THEN_LIST_SCRIPT = `label=$1; shift
docker stop --time 0 -- "$@" >/dev/null 2>&1
${LIST_SCRIPT.replaceAll('"label=$1"', '"label=$label"')}`;

// The last lines of one container (docker logs, stderr merged as the log reader takes it), then the
// removal of the containers named after the tail: a restart's cause read and its old group removed
// in one round trip. The removal's own words are not mixed into the log.
const LOGS_THEN_REMOVE_SCRIPT = `c=$1; tail=$2; shift 2
docker logs --timestamps --tail "$tail" -- "$c" 2>&1
docker rm --force -- "$@" >/dev/null 2>&1
exit 0`;

// `docker logs --follow` runs until its container is removed, whoever stopped reading: over a
// shared ssh connection, a mux client that dies does not end the remote command, the master only
// sends EOF on the session's stdin (openssh-portable mux.c, mux_master_control_cleanup_cb:
// chan_read_failed on the session channel; mux_master_process_new_session makes the client's
// stdin that channel's input), and sshd sends no signal without a tty. So the follower runs in
// the background and a watcher reads stdin (kept open, empty, by streamLocal) until EOF, then
// ends it. A non-interactive shell gives background jobs /dev/null as stdin (POSIX, "Asynchronous
// Lists"): the watcher reads a copy made first. Arguments come only as "$@".
const FOLLOW_SCRIPT = `exec 3<&0
"$@" </dev/null &
follower=$!
( while read -r _ <&3; do :; done; kill "$follower" 2>/dev/null ) &
watcher=$!
wait "$follower"
status=$?
kill "$watcher" 2>/dev/null
exit "$status"`;

// Waits for one line on stdin, then kills the containers named as arguments; EOF first: nothing.
const ARMED_KILL_SCRIPT = `read -r _ || exit 0
exec docker kill -- "$@"`;

/** A `docker kill` made ready on a node (SshDocker.armKill). */
export interface ArmedKill {
  /** Kills now; resolves when docker has answered. */
  fire(): Promise<void>;
  /** Never fires: the waiting shell on the node ends (resolved once it has). */
  disarm(): Promise<void>;
}

/**
 * `argv` run on the node so that it ends when its reader goes away (FOLLOW_SCRIPT above): for any
 * endless remote command read through Transport.stream.
 */
export const untilReaderGoes = (argv: readonly string[]): string[] => ["sh", "-c", FOLLOW_SCRIPT, "sh", ...argv];

/** An env value written on docker run's command line: `--env K=V`, `-e K=V`, `--env=K=V`, `-e=K=V`, `-eK=V`. */
function envOption(argv: readonly string[], i: number): { readonly value: string; readonly words: number } | undefined {
  const w = argv[i] as string;
  if (w === "--env" || w === "-e") return argv[i + 1] === undefined ? undefined : { value: argv[i + 1] as string, words: 2 };
  // spf13/pflag flag.go parseLongArg takes `--name=value`; parseSingleShortArg takes `-e=value`
  // and `-evalue` (the rest of the word after a shorthand that wants a value).
  if (w.startsWith("--env=")) return { value: w.slice("--env=".length), words: 1 };
  if (w.startsWith("-e") && w.length > 2 && !w.startsWith("--")) return { value: w.slice(w[2] === "=" ? 3 : 2), words: 1 };
  return undefined;
}

/**
 * A `docker run` command line with every env value on it moved into the env file that goes over
 * stdin: no argv carries a value, whatever plan it came from (a plan saved by a launcher that
 * wrote `--env K=V` is restarted as it was saved). Only docker's own options move: those before
 * the `--` that ends them ahead of the image. `--env K` (no `=`, the value from docker's own
 * environment) carries none and stays. docker/cli opts/parse.go ReadKVEnvStrings reads the env
 * files first and the `--env` values after them, so an `--env` value wins, as it does here.
 */
export function envOffCommandLine(argv: readonly string[], env: Readonly<Record<string, string>>): { argv: string[]; env: Record<string, string> } {
  const end = argv.indexOf("--");
  const options = end < 0 ? argv : argv.slice(0, end);
  const kept: string[] = [];
  const moved: Record<string, string> = {};
  for (let i = 0; i < options.length; i++) {
    const opt = envOption(options, i);
    const eq = opt?.value.indexOf("=") ?? -1;
    if (opt === undefined || eq <= 0) {
      kept.push(options[i] as string);
      continue;
    }
    if (end < 0) {
      throw new UserError(
        "a saved plan runs docker with env values on its command line and no `--` before the image, so launcher cannot tell its options from the engine's",
        "run `launcher up` again: a new plan passes the env on stdin",
      );
    }
    moved[opt.value.slice(0, eq)] = opt.value.slice(eq + 1);
    i += opt.words - 1;
  }
  if (Object.keys(moved).length === 0) return { argv: [...argv], env: { ...env } };
  const fromStdin = kept.some((w, i) => w === "--env-file" && kept[i + 1] === ENV_FROM_STDIN);
  return { argv: [...kept, ...(fromStdin ? [] : ["--env-file", ENV_FROM_STDIN]), ...argv.slice(end)], env: { ...env, ...moved } };
}

/**
 * Where `docker logs --since` starts: seconds back from the node's own clock (a Go duration, which
 * the docker client on the node computes from its time, so clock skew between here and the node
 * does not matter), or an instant as Unix seconds (no time zone to guess). Both forms are in
 * moby/moby man/src/container/logs.md.
 */
export type LogsSince = { readonly agoSeconds: number } | { readonly unixSeconds: number };

export const logsSinceArg = (since: LogsSince): string =>
  "agoSeconds" in since ? `${Math.max(0, Math.ceil(since.agoSeconds))}s` : String(Math.floor(since.unixSeconds));

/**
 * One line of `docker events --format '{{json .}}'`: moby/moby api/types/events/events.go
 * `Message` (Type, Action, Actor{ID, Attributes}; a container's Attributes are its labels
 * plus name, image and, for `die`, exitCode).
 */
const DockerEventSchema = z.looseObject({
  Type: z.string(),
  Action: z.string(),
  Actor: z.looseObject({ ID: z.string(), Attributes: z.record(z.string(), z.string()).nullish() }),
});

export interface DockerEvent {
  readonly type: string;
  readonly action: string;
  readonly id: string;
  readonly attributes: Readonly<Record<string, string>>;
}

/** A line of `docker events` output, or undefined when it is not one (a warning the client printed). */
export function decodeDockerEvent(line: string): DockerEvent | undefined {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch {
    return undefined;
  }
  const r = DockerEventSchema.safeParse(json);
  if (!r.success) return undefined;
  const e = r.data;
  return { type: e.Type, action: e.Action, id: e.Actor.ID, attributes: e.Actor.Attributes ?? {} };
}

/**
 * Every operation launcher asks of one node's Docker, in the manner of testcontainers-node's
 * ContainerClient (packages/testcontainers/src/container-runtime/clients/container/container-client.ts):
 * SshDocker runs them on the node through its transport; test/support/fake-node.ts's FakeNode
 * keeps them in memory. `transport` is the node's shell, for the scripts that are not Docker's
 * (preflight's batched read, claims, the memory watch, transfers).
 */
export interface Docker {
  readonly node: string;
  readonly transport: Transport;
  serverVersion(): Promise<string>;
  /** The image's ID, or undefined when the node does not have it. */
  imageId(image: string): Promise<string | undefined>;
  /** The image's ENTRYPOINT (.Config.Entrypoint), null when it has none. */
  imageEntrypoint(image: string): Promise<string[] | null>;
  /** `argv` run once in the image (its first word as the entrypoint): no network, no labels, removed after. */
  runInImage(image: string, argv: readonly string[], timeoutMs: number, signal?: AbortSignal): Promise<{ code: number; output: string }>;
  /** Containers (running or not) that carry `label` (a key, or key=value). */
  containers(label: string): Promise<ContainerInfo[]>;
  /** What LIST_SCRIPT printed on this node, read (a batched read runs it: src/boot/preflight.ts). */
  listing(r: ExecResult): ContainerInfo[];
  /** `names` stopped at once (each waited for), then containers(label). */
  stopThenList(label: string, names: readonly string[]): Promise<ContainerInfo[]>;
  /** The last `tail` lines of `container`'s log, then `names` removed (killed if they run). */
  logsThenRemove(container: string, tail: number, names: readonly string[]): Promise<string[]>;
  /** `docker run` of a plan's argv, `env` given as an env file on stdin: the new container's ID. */
  run(argv: readonly string[], env?: Readonly<Record<string, string>>): Promise<string>;
  /** SIGTERM, up to `graceSeconds`, then SIGKILL; then removal. Missing containers are fine. */
  stopAndRemove(names: readonly string[], graceSeconds: number): Promise<void>;
  /** SIGTERM, up to `graceSeconds`, then SIGKILL, each waited for; their records stay. */
  stop(names: readonly string[], graceSeconds: number): Promise<void>;
  /** Removes the containers (killing any still running); missing ones are fine. */
  remove(names: readonly string[]): Promise<void>;
  /** SIGKILL at once; the containers stay, stopped. */
  kill(names: readonly string[]): Promise<void>;
  /** `kill`, made ready ahead (the memory guard's one race with the kernel). */
  armKill(names: readonly string[]): ArmedKill;
  /** The container's log lines; with `follow`, until the container ends or `signal` aborts. */
  logs(container: string, options?: LogsOptions): AsyncIterable<string>;
  /** `docker events` lines (JSON: decodeDockerEvent) of containers that carry `label`, kept to `actions`, until `signal` aborts. */
  events(label: string, actions: readonly string[], signal: AbortSignal): AsyncIterable<string>;
}

export interface LogsOptions {
  readonly follow?: boolean;
  readonly tail?: number;
  readonly since?: LogsSince;
  readonly signal?: AbortSignal;
}

interface InspectJson {
  Id: string;
  Name: string;
  Image: string;
  Config: { Labels: Record<string, string> | null };
  State: { Status: string; Running: boolean; ExitCode: number; StartedAt: string; FinishedAt: string };
}

/** `docker inspect`'s JSON of `containers`, as LIST_SCRIPT prints it (a fake node prints the same). */
export const inspectJson = (containers: readonly ContainerInfo[]): string =>
  JSON.stringify(
    containers.map(
      (c): InspectJson => ({
        Id: c.id,
        Name: `/${c.name}`,
        Image: c.image,
        Config: { Labels: { ...c.labels } },
        State: { Status: c.state, Running: c.running, ExitCode: c.exitCode, StartedAt: c.startedAt, FinishedAt: c.finishedAt },
      }),
    ),
  );

/**
 * What LIST_SCRIPT printed on `transport`'s node, read. A container removed between ps and
 * inspect is simply gone; inspect still prints the others.
 */
export function readListing(transport: Transport, r: ExecResult): ContainerInfo[] {
  const lost = unreachable(transport, r);
  if (lost !== undefined) throw lost;
  if (r.code === PS_FAILED || (r.code !== 0 && r.stdout.trim() === "")) throw new RemoteError(transport.node, `docker ps failed (exit ${r.code})`, outputTail(r));
  const json = JSON.parse(r.stdout.trim() || "[]") as InspectJson[];
  return json.map((c) => ({
    id: c.Id,
    name: c.Name.replace(/^\//, ""),
    labels: c.Config.Labels ?? {},
    state: c.State.Status,
    running: c.State.Running,
    exitCode: c.State.ExitCode,
    startedAt: c.State.StartedAt,
    finishedAt: c.State.FinishedAt,
    image: c.Image,
  }));
}

/**
 * Docker on a node, run through its transport (SSH, or this machine's shell). Names and images
 * come after `--`: every docker command parses its flags with spf13/pflag, which ends them at
 * `--` (flag.go parseArgs), so a value can never be read as an option.
 */
/** What a question to an image may print (a parser dump is a few hundred KiB). */
const IN_IMAGE_MAX_CHARS = 8 * 1024 * 1024;

export class SshDocker implements Docker {
  constructor(readonly transport: Transport) {}

  get node(): string {
    return this.transport.node;
  }

  private ok(argv: readonly string[], what: string, timeoutMs = 60_000): Promise<string> {
    return execChecked(this.transport, argv, what, timeoutMs);
  }

  async serverVersion(): Promise<string> {
    return (await this.ok(["docker", "version", "--format", "{{.Server.Version}}"], "docker version", 20_000)).trim();
  }

  /** The image's ID, or undefined when the node does not have it. */
  async imageId(image: string): Promise<string | undefined> {
    const r = await this.transport.exec(["docker", "image", "inspect", "--format", "{{.Id}}", "--", image], { timeoutMs: 20_000 });
    // Unreachable: the node is unknown, not without the image.
    const lost = unreachable(this.transport, r);
    if (lost !== undefined) throw lost;
    return r.code === 0 ? r.stdout.trim() : undefined;
  }

  /** The image's ENTRYPOINT (.Config.Entrypoint), null when it has none. */
  async imageEntrypoint(image: string): Promise<string[] | null> {
    const out = await this.ok(["docker", "image", "inspect", "--format", "{{json .Config.Entrypoint}}", "--", image], "docker image inspect", 20_000);
    const parsed = JSON.parse(out.trim() || "null") as unknown;
    return Array.isArray(parsed) ? parsed.map(String) : null;
  }

  /**
   * Runs `argv` once in the image (its first word replacing the ENTRYPOINT), without network or
   * labels (no deployment sees it), and removes the container: a question to the image itself.
   */
  async runInImage(image: string, argv: readonly string[], timeoutMs: number, signal?: AbortSignal): Promise<{ code: number; output: string }> {
    const [entry, ...args] = argv;
    if (entry === undefined) throw new Error("runInImage needs a command");
    const r = await this.transport.exec(["docker", "run", "--rm", "--network", "none", "--entrypoint", entry, "--", image, ...args], { timeoutMs, maxChars: IN_IMAGE_MAX_CHARS, ...(signal ? { signal } : {}) });
    const lost = unreachable(this.transport, r);
    if (lost !== undefined) throw lost;
    return { code: r.code, output: `${r.stdout}\n${r.stderr}` };
  }

  /** Containers (running or not) that carry `label` (a key, or key=value). One round trip. */
  async containers(label: string): Promise<ContainerInfo[]> {
    return this.listing(await this.transport.exec(["sh", "-c", LIST_SCRIPT, "sh", label], { timeoutMs: 20_000 }));
  }

  listing(r: ExecResult): ContainerInfo[] {
    return readListing(this.transport, r);
  }

  /** `docker stop --time 0` of `names` (each waited for until it ended), then containers(label): one round trip. */
  async stopThenList(label: string, names: readonly string[]): Promise<ContainerInfo[]> {
    return this.listing(await this.transport.exec(["sh", "-c", STOP_THEN_LIST_SCRIPT, "sh", label, ...names], { timeoutMs: 40_000 }));
  }

  /**
   * The last `tail` lines of `container`'s log, then `names` removed (killed if they run): one
   * round trip. A node that stops answering is an UnreachableError.
   */
  async logsThenRemove(container: string, tail: number, names: readonly string[]): Promise<string[]> {
    const r = await this.transport.exec(["sh", "-c", LOGS_THEN_REMOVE_SCRIPT, "sh", container, String(tail), ...names], { timeoutMs: 30_000 });
    const lost = unreachable(this.transport, r);
    if (lost !== undefined) throw lost;
    return r.stdout.split("\n").filter((l) => l !== "");
  }

  /**
   * `docker run` (argv from the plan, which reads its env with `--env-file /dev/stdin`), with
   * `env` written to the remote command's stdin as an env file: the values (keys among them)
   * are on no command line, neither ssh's here nor the shell's or docker's on the node. An env
   * value on `argv` itself joins them (envOffCommandLine).
   */
  async run(argv: readonly string[], env: Readonly<Record<string, string>> = {}): Promise<string> {
    const off = envOffCommandLine(argv, env);
    const r = await this.transport.exec(off.argv, { timeoutMs: 60_000, stdin: envFileText(off.env) });
    if (r.code !== 0) throw unreachable(this.transport, r) ?? new RemoteError(this.node, `docker run failed (exit ${r.code})`, outputTail(r));
    return r.stdout.trim();
  }

  /**
   * SIGTERM, up to `graceSeconds`, then SIGKILL; then removal. Missing containers are fine; a
   * node that stops answering midway is an UnreachableError (its containers may still be there).
   */
  async stopAndRemove(names: readonly string[], graceSeconds: number): Promise<void> {
    // No grace: `docker rm --force` alone kills and removes, one round trip fewer (docker/cli
    // docs/reference/commandline/container_rm.md: "--force: Force the removal of a running container (uses SIGKILL)").
    if (graceSeconds > 0) await this.stop(names, graceSeconds);
    await this.remove(names);
  }

  /**
   * SIGTERM, up to `graceSeconds`, then SIGKILL, and waits until each has ended (moby
   * daemon/stop.go containerStop); its record (FinishedAt, exit code, log) stays. Missing or
   * already ended containers are fine.
   */
  async stop(names: readonly string[], graceSeconds: number): Promise<void> {
    if (names.length === 0) return;
    const lost = unreachable(this.transport, await this.transport.exec(["docker", "stop", "--time", String(graceSeconds), "--", ...names], { timeoutMs: (graceSeconds + 30) * 1000 }));
    if (lost !== undefined) throw lost;
  }

  /** Removes the containers (killing any still running); missing ones are fine. */
  async remove(names: readonly string[]): Promise<void> {
    if (names.length === 0) return;
    const lost = unreachable(this.transport, await this.transport.exec(["docker", "rm", "--force", "--", ...names], { timeoutMs: 30_000 }));
    if (lost !== undefined) throw lost;
  }

  /**
   * SIGKILL at once, no grace ("The main process inside the container is sent SIGKILL signal
   * (default)": docker/cli docs/reference/commandline/container_kill.md): the memory guard has no time for a graceful stop. The
   * containers stay, stopped, for the rollback to remove; one already gone is not an error here.
   */
  async kill(names: readonly string[]): Promise<void> {
    if (names.length === 0) return;
    const r = await this.transport.exec(["docker", "kill", "--", ...names], { timeoutMs: 10_000 });
    const lost = unreachable(this.transport, r);
    if (lost !== undefined) throw lost;
    if (r.code !== 0 && !/No such container|is not running/i.test(r.stderr)) throw new RemoteError(this.node, `docker kill failed (exit ${r.code})`, outputTail(r));
  }

  /**
   * `kill`, made ready ahead: the SSH session and the remote shell are opened now and wait on
   * stdin, so that a trip costs one written line instead of a new ssh process and session (the
   * memory guard's kill is the one moment launcher races the kernel). A line runs `docker kill`;
   * closing stdin (disarm, or this process dying) ends the shell without killing anything.
   */
  armKill(names: readonly string[]): ArmedKill {
    const proc = this.transport.spawn(["sh", "-c", ARMED_KILL_SCRIPT, "sh", ...names]);
    let fired = false;
    return {
      fire: async () => {
        fired = true;
        proc.stdin.write("kill\n");
        proc.stdin.end();
        const r = await proc.done;
        if (r.code !== 0 && !/No such container|is not running/i.test(r.stderr)) {
          throw unreachable(this.transport, { code: r.code, stdout: "", stderr: r.stderr }) ?? new RemoteError(this.node, `docker kill failed (exit ${r.code})`, r.stderr.trim());
        }
      },
      disarm: async () => {
        if (fired) return;
        proc.stdin.end();
        await proc.done;
      },
    };
  }

  /** The container's log lines; with `follow`, the follower on the node ends when the reader does. */
  logs(container: string, options: LogsOptions = {}): AsyncIterable<string> {
    const argv = [
      "docker", "logs", "--timestamps",
      ...(options.follow ? ["--follow"] : []),
      ...(options.tail === undefined ? [] : ["--tail", String(options.tail)]),
      ...(options.since === undefined ? [] : ["--since", logsSinceArg(options.since)]),
      "--", container,
    ];
    return this.transport.stream(options.follow ? untilReaderGoes(argv) : argv, options.signal ? { signal: options.signal } : {});
  }

  /**
   * The node's container events as they happen (`docker events`, which without --since prints only
   * new ones: moby/moby man/docker-events.1.md), kept to `actions` of containers that carry `label`;
   * one JSON object per line (decodeDockerEvent). Runs until `signal` aborts or the node goes away;
   * like a followed log, the command on the node ends with its reader (FOLLOW_SCRIPT).
   */
  events(label: string, actions: readonly string[], signal: AbortSignal): AsyncIterable<string> {
    const argv = ["docker", "events", "--format", "{{json .}}", "--filter", "type=container", "--filter", `label=${label}`, ...actions.flatMap((a) => ["--filter", `event=${a}`])];
    return this.transport.stream(["sh", "-c", FOLLOW_SCRIPT, "sh", ...argv], { signal });
  }
}
