import { READ_SCRIPT } from "../../src/boot/preflight.js";
import { NODE_GUARD_READ_SCRIPT, NODE_GUARD_START_SCRIPT, NODE_GUARD_STOP_SCRIPT } from "../../src/memory/node-guard.js";
import { CLAIM_SCRIPT } from "../../src/claims/claims.js";
import { SAMPLER_SCRIPT } from "../../src/memory/memory-watch.js";
import { inspectJson, LIST_SCRIPT, readListing, type ArmedKill, type ContainerInfo, type Docker, type LogsOptions } from "../../src/remote/docker.js";
import type { ExecOptions, ExecResult, Transport } from "../../src/remote/transport.js";

// One node's Docker in memory (the Docker interface of src/remote/docker.ts) and a transport that
// answers the scripts launcher runs on a node, recognised by the exported constant they are (never
// by the text of what a test put in them). See fake-cluster.ts for the usage note.

/** An image a fake node holds: its ID, ENTRYPOINT and what a command run in it answers. */
export interface FakeImage {
  readonly id: string;
  readonly entrypoint: readonly string[] | null;
  /** What `argv` run in the image (runInImage) answers; default: `vllm --version` prints `version`, anything else exit 0. */
  readonly run?: (argv: readonly string[]) => { code: number; output: string };
  /** The engine version its `vllm --version` prints; default 0.12.0. */
  readonly version?: string;
}

/** What a fake node was asked: the Docker operation and its arguments, or `exec`/`stream` with the script's name. */
export interface FakeCall {
  readonly op: string;
  readonly args: readonly unknown[];
}

/** A container of the fake node, its log so far and who waits for more. */
interface Box {
  info: ContainerInfo;
  readonly log: string[];
  readonly wake: Set<() => void>;
}

const NEVER = "0001-01-01T00:00:00Z";

/** The scripts a fake node answers, by the name a call record gives them. */
const SCRIPT_NAMES = new Map([
  [READ_SCRIPT, "READ_SCRIPT"],
  [LIST_SCRIPT, "LIST_SCRIPT"],
  [SAMPLER_SCRIPT, "SAMPLER_SCRIPT"],
  [CLAIM_SCRIPT, "CLAIM_SCRIPT"],
  [NODE_GUARD_START_SCRIPT, "NODE_GUARD_START_SCRIPT"],
  [NODE_GUARD_STOP_SCRIPT, "NODE_GUARD_STOP_SCRIPT"],
  [NODE_GUARD_READ_SCRIPT, "NODE_GUARD_READ_SCRIPT"],
]);
const MIB = 1024;

/** /proc/meminfo's text with MemTotal and MemAvailable (GiB), as fit and the guard read it. */
export const meminfoText = (totalGiB: number, availableGiB: number): string => {
  const kib = (g: number): number => Math.round(g * MIB * MIB);
  return `MemTotal:       ${kib(totalGiB)} kB\nMemFree:        ${kib(availableGiB)} kB\nMemAvailable:   ${kib(availableGiB)} kB\nBuffers:               0 kB\nCached:                0 kB\nShmem:                 0 kB\n`;
};

let lastEndNs = 0n;
/**
 * Now as `docker inspect` gives a container's State.FinishedAt: RFC 3339 with nanoseconds (Go's
 * time.RFC3339Nano), each stamp later than the last. Two ranks that end in one millisecond keep
 * their order, as Docker's stamps keep it, so a restart's blame (the rank that ended first) is not
 * left to a tie.
 */
export function dockerNow(): string {
  const ns = BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
  lastEndNs = ns > lastEndNs ? ns : lastEndNs + 1000n;
  const whole = new Date(Number(lastEndNs / 1_000_000n)).toISOString().slice(0, 19);
  return `${whole}.${(lastEndNs % 1_000_000_000n).toString().padStart(9, "0")}Z`;
}

/** A docker log line as `docker logs --timestamps` prints it, stamped now. */
export const stamped = (line: string, at = new Date()): string => `${at.toISOString().replace("Z", "000000Z")} ${line}`;

/** The `--name` and `--label` values and the image (after `--`) of a `docker run` argv. */
function readRun(argv: readonly string[]): { name: string; labels: Record<string, string>; image: string } {
  const end = argv.indexOf("--");
  const options = end < 0 ? argv : argv.slice(0, end);
  const labels: Record<string, string> = {};
  let name = "";
  for (let i = 0; i < options.length; i++) {
    if (options[i] === "--name") name = options[++i] ?? "";
    else if (options[i] === "--label") {
      const kv = options[++i] ?? "";
      const eq = kv.indexOf("=");
      labels[eq < 0 ? kv : kv.slice(0, eq)] = eq < 0 ? "" : kv.slice(eq + 1);
    }
  }
  return { name, labels, image: end < 0 ? "" : (argv[end + 1] ?? "") };
}

/** Does `c` carry `label` (a key, or key=value), as `docker ps --filter label=...` reads it? */
const carries = (c: ContainerInfo, label: string): boolean => {
  const eq = label.indexOf("=");
  return eq < 0 ? label in c.labels : c.labels[label.slice(0, eq)] === label.slice(eq + 1);
};

export interface FakeNodeOptions {
  readonly meminfo?: string;
  readonly images?: Readonly<Record<string, FakeImage>>;
}

export class FakeNode implements Docker {
  readonly transport: Transport;
  /** Every operation asked of this node, in order. */
  readonly calls: FakeCall[] = [];
  /** Names of the containers removed, in order. */
  readonly removed: string[] = [];
  /** /proc/meminfo as the node reads it (preflight's fit, the guard's samples). */
  meminfo: string;
  readonly images: Map<string, FakeImage>;
  /** Called after each `docker run` made its container (running): where a test scripts what the container logs. */
  onRun: (c: ContainerInfo, env: Readonly<Record<string, string>>) => void = () => undefined;
  /** Called once a container stopped running (exited, killed, removed). */
  onExit: (c: ContainerInfo) => void = () => undefined;
  /** The node's claim (src/claims/claims.ts CLAIM_SCRIPT's file): its id, record and when it was last written (ms). */
  claim: { id: string; record: string; at: number } | undefined;
  private readonly boxes = new Map<string, Box>();
  private readonly memoryWake = new Set<() => void>();
  private readonly eventWake = new Set<(line: string) => void>();
  private ids = 0;

  constructor(
    readonly node: string,
    options: FakeNodeOptions = {},
  ) {
    this.meminfo = options.meminfo ?? meminfoText(128, 127);
    this.images = new Map(Object.entries(options.images ?? {}));
    this.transport = this.fakeTransport();
  }

  // --- what a test does to the node ---

  /** A container that is there before (or beside) what launcher does: running unless `state` says otherwise. */
  add(name: string, labels: Readonly<Record<string, string>>, options: { state?: string; image?: string; log?: readonly string[] } = {}): ContainerInfo {
    const state = options.state ?? "running";
    const info: ContainerInfo = { id: `${this.node}-${++this.ids}`, name, labels: { ...labels }, state, running: state === "running", exitCode: 0, startedAt: new Date().toISOString(), finishedAt: NEVER, image: options.image ?? "img" };
    this.boxes.set(name, { info, log: (options.log ?? []).map((l) => stamped(l)), wake: new Set() });
    return info;
  }

  /** Lines the container prints now (stamped with the time); followers of its log get them. */
  say(name: string, ...lines: readonly string[]): void {
    const box = this.boxes.get(name);
    if (box === undefined) throw new Error(`fake node ${this.node}: no container ${name}`);
    box.log.push(...lines.map((l) => stamped(l)));
    this.wakeAll(box);
  }

  /** The container's main process exits with `code`: its followed log ends, a `die` event is sent. */
  exit(name: string, code: number): void {
    const box = this.boxes.get(name);
    if (box === undefined || !box.info.running) return;
    box.info = { ...box.info, state: "exited", running: false, exitCode: code, finishedAt: dockerNow() };
    this.wakeAll(box);
    this.onExit(box.info);
    const attributes = { ...box.info.labels, name, image: box.info.image, exitCode: String(code) };
    const line = JSON.stringify({ Type: "container", Action: "die", Actor: { ID: box.info.id, Attributes: attributes } });
    for (const w of this.eventWake) w(line);
  }

  /** Available memory changes (GiB): the guard's sampler sees it at once. */
  setMemory(totalGiB: number, availableGiB: number): void {
    this.meminfo = meminfoText(totalGiB, availableGiB);
    for (const w of [...this.memoryWake]) w();
  }

  /** The containers on the node now, as `name:state`, sorted. */
  states(): string[] {
    return [...this.boxes.values()].map((b) => `${b.info.name}:${b.info.state}`).sort();
  }

  /** What the named container logged so far (its lines without timestamps). */
  logOf(name: string): readonly string[] {
    return (this.boxes.get(name)?.log ?? []).map((l) => l.slice(l.indexOf(" ") + 1));
  }

  /** The Docker operations asked, by name. */
  asked(op: string): FakeCall[] {
    return this.calls.filter((c) => c.op === op);
  }

  // --- the Docker interface ---

  async serverVersion(): Promise<string> {
    this.record("serverVersion");
    return "28.0.0";
  }

  async imageId(image: string): Promise<string | undefined> {
    this.record("imageId", image);
    return this.images.get(image)?.id;
  }

  async imageEntrypoint(image: string): Promise<string[] | null> {
    this.record("imageEntrypoint", image);
    const img = this.images.get(image);
    if (img === undefined) throw new Error(`fake node ${this.node}: no image ${image}`);
    return img.entrypoint === null ? null : [...img.entrypoint];
  }

  async runInImage(image: string, argv: readonly string[]): Promise<{ code: number; output: string }> {
    this.record("runInImage", image, argv);
    const img = this.images.get(image);
    if (img === undefined) return { code: 125, output: `Unable to find image '${image}' locally` };
    if (img.run !== undefined) return img.run(argv);
    return argv.join(" ") === "vllm --version" ? { code: 0, output: `${img.version ?? "0.12.0"}\n` } : { code: 0, output: "" };
  }

  async containers(label: string): Promise<ContainerInfo[]> {
    this.record("containers", label);
    return this.list(label);
  }

  listing(r: ExecResult): ContainerInfo[] {
    return readListing(this.transport, r);
  }

  async stopThenList(label: string, names: readonly string[]): Promise<ContainerInfo[]> {
    this.record("stopThenList", label, names);
    this.ended(names, 137);
    return this.list(label);
  }

  async logsThenRemove(container: string, tail: number, names: readonly string[]): Promise<string[]> {
    this.record("logsThenRemove", container, tail, names);
    const log = this.boxes.get(container)?.log ?? [];
    this.drop(names);
    return log.slice(-tail);
  }

  async run(argv: readonly string[], env: Readonly<Record<string, string>> = {}): Promise<string> {
    this.record("run", argv, env);
    const { name, labels, image } = readRun(argv);
    if (this.boxes.has(name)) throw new Error(`fake node ${this.node}: the container name "/${name}" is already in use`);
    const info = this.add(name, labels, { image });
    this.onRun(info, env);
    return info.id;
  }

  async stopAndRemove(names: readonly string[], graceSeconds: number): Promise<void> {
    this.record("stopAndRemove", names, graceSeconds);
    this.drop(names);
  }

  async stop(names: readonly string[], graceSeconds: number): Promise<void> {
    this.record("stop", names, graceSeconds);
    this.ended(names, 143);
  }

  async remove(names: readonly string[]): Promise<void> {
    this.record("remove", names);
    this.drop(names);
  }

  async kill(names: readonly string[]): Promise<void> {
    this.record("kill", names);
    this.ended(names, 137);
  }

  armKill(names: readonly string[]): ArmedKill {
    this.record("armKill", names);
    let done = false;
    return {
      fire: async () => {
        if (done) return;
        done = true;
        await this.kill(names);
      },
      disarm: async () => void (done = true),
    };
  }

  logs(container: string, options: LogsOptions = {}): AsyncIterable<string> {
    this.record("logs", container, { follow: options.follow === true, ...(options.tail === undefined ? {} : { tail: options.tail }) });
    return this.follow(container, options);
  }

  events(label: string, actions: readonly string[], signal: AbortSignal): AsyncIterable<string> {
    this.record("events", label, actions);
    return this.heard(signal, (line) => {
      const e = JSON.parse(line) as { Action: string; Actor: { Attributes: Record<string, string> } };
      const eq = label.indexOf("=");
      const has = eq < 0 ? label in e.Actor.Attributes : e.Actor.Attributes[label.slice(0, eq)] === label.slice(eq + 1);
      return has && actions.includes(e.Action);
    });
  }

  // --- inside ---

  private record(op: string, ...args: unknown[]): void {
    this.calls.push({ op, args });
  }

  private list(label: string): ContainerInfo[] {
    return [...this.boxes.values()].map((b) => b.info).filter((c) => carries(c, label));
  }

  private ended(names: readonly string[], code: number): void {
    for (const n of names) this.exit(n, code);
  }

  private drop(names: readonly string[]): void {
    for (const n of names) {
      const box = this.boxes.get(n);
      if (box === undefined) continue;
      this.exit(n, 137);
      this.boxes.delete(n);
      this.removed.push(n);
      this.wakeAll(box);
    }
  }

  private wakeAll(box: Box): void {
    for (const w of [...box.wake]) w();
  }

  /** A container's log: what it holds, then (following) each new line, until it ends, is removed or `signal` aborts. */
  private async *follow(container: string, options: LogsOptions): AsyncGenerator<string> {
    const box = this.boxes.get(container);
    if (box === undefined) return;
    let at = options.tail === undefined ? 0 : Math.max(0, box.log.length - options.tail);
    for (;;) {
      while (at < box.log.length) yield box.log[at++] as string;
      const gone = !this.boxes.has(container) || !box.info.running;
      if (options.follow !== true || gone || options.signal?.aborted === true) return;
      await this.until(box.wake, options.signal);
    }
  }

  /** Resolves on the next wake of `set`, or when `signal` aborts. */
  private until(set: Set<() => void>, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        set.delete(done);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      set.add(done);
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  /** The event lines sent from now on that `keep` keeps, until `signal` aborts. */
  private async *heard(signal: AbortSignal, keep: (line: string) => boolean): AsyncGenerator<string> {
    const queue: string[] = [];
    let wake: (() => void) | undefined;
    const listen = (line: string): void => {
      if (keep(line)) queue.push(line);
      wake?.();
    };
    const end = (): void => wake?.();
    this.eventWake.add(listen);
    signal.addEventListener("abort", end, { once: true });
    try {
      while (!signal.aborted) {
        while (queue.length > 0) yield queue.shift() as string;
        if (signal.aborted) break;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      this.eventWake.delete(listen);
      signal.removeEventListener("abort", end);
    }
  }

  /** The memory sampler's lines (`mem TOTAL AVAILABLE`): one now, one at each change, until `signal` aborts. */
  private async *samples(signal: AbortSignal | undefined): AsyncGenerator<string> {
    while (signal?.aborted !== true) {
      const total = /^MemTotal:\s+(\d+)/m.exec(this.meminfo)?.[1];
      const available = /^MemAvailable:\s+(\d+)/m.exec(this.meminfo)?.[1];
      yield `mem ${total ?? 0} ${available ?? 0}`;
      await this.until(this.memoryWake, signal);
    }
  }

  /** READ_SCRIPT's answer: each part between the nonce's markers (src/boot/preflight.ts readSections). */
  private readAnswer(args: readonly string[]): ExecResult {
    const [nonce, image, label] = args;
    const id = image === undefined ? undefined : this.images.get(image)?.id;
    const part = (name: string, r: ExecResult): string => `${nonce} ${name}\n${r.stdout}\n${nonce} err ${r.code}\n${r.stderr}\n`;
    const out = [
      part("containers", { code: 0, stdout: inspectJson(this.list(label ?? "")), stderr: "" }),
      part("image", id === undefined ? { code: 1, stdout: "", stderr: `Error: No such image: ${image}` } : { code: 0, stdout: id, stderr: "" }),
      part("mounts", { code: 0, stdout: "", stderr: "" }),
      part("meminfo", { code: 0, stdout: this.meminfo.trimEnd(), stderr: "" }),
    ];
    return { code: 0, stdout: out.join(""), stderr: "" };
  }

  /** CLAIM_SCRIPT's answer (take, renew, release), on the node's one claim; its exit codes are the script's. */
  private claimAnswer(args: readonly string[]): ExecResult {
    const [op, id = "", expect = "", record = ""] = args;
    const cur = this.claim;
    const ok: ExecResult = { code: 0, stdout: "", stderr: "" };
    if (op === "take") {
      if (cur !== undefined && cur.id !== id && cur.id !== expect) return { code: 3, stdout: `held ${Math.round((Date.now() - cur.at) / 1000)}\n${cur.id}\n${cur.record}\n`, stderr: "" };
      this.claim = { id, record, at: Date.now() };
      return ok;
    }
    if (op === "renew") {
      if (cur?.id !== id) return { code: 4, stdout: "", stderr: "" };
      cur.at = Date.now();
      return ok;
    }
    if (op === "release" && cur?.id === id) this.claim = undefined;
    return op === "release" ? ok : { code: 2, stdout: "", stderr: "" };
  }

  /** The node's shell: answers the scripts it knows by their constant; anything else fails, recorded. */
  private fakeTransport(): Transport {
    // `sh -c SCRIPT sh ARGS...`, possibly inside untilReaderGoes' wrapper (`sh -c FOLLOW sh sh -c SCRIPT sh ARGS...`).
    const script = (argv: readonly string[]): { text: string; args: readonly string[] } | undefined => {
      const at = argv.findIndex((w, i) => w === "-c" && argv[i - 1] === "sh" && SCRIPT_NAMES.has(argv[i + 1] ?? ""));
      return at < 0 ? undefined : { text: argv[at + 1] as string, args: argv.slice(at + 3) };
    };
    const unknown = (argv: readonly string[]): ExecResult => ({ code: 127, stdout: "", stderr: `fake node ${this.node}: no answer scripted for ${argv.slice(0, 3).join(" ")}` });
    return {
      node: this.node,
      exec: async (argv: readonly string[], _options?: ExecOptions): Promise<ExecResult> => {
        const s = script(argv);
        this.record("exec", s === undefined ? argv : (SCRIPT_NAMES.get(s.text) ?? argv));
        if (s?.text === READ_SCRIPT) return this.readAnswer(s.args);
        if (s?.text === CLAIM_SCRIPT) return this.claimAnswer(s.args);
        if (s?.text === LIST_SCRIPT) return { code: 0, stdout: inspectJson(this.list(s.args[0] ?? "")), stderr: "" };
        // The guard on the node itself (src/memory/node-guard.ts): started and removed, nothing more of it.
        if (s?.text === NODE_GUARD_START_SCRIPT || s?.text === NODE_GUARD_STOP_SCRIPT || s?.text === NODE_GUARD_READ_SCRIPT) return { code: 0, stdout: "", stderr: "" };
        return unknown(argv);
      },
      stream: (argv: readonly string[], options: { signal?: AbortSignal } = {}): AsyncIterable<string> => {
        const s = script(argv);
        this.record("stream", s === undefined ? argv : (SCRIPT_NAMES.get(s.text) ?? argv));
        if (s?.text === SAMPLER_SCRIPT) return this.samples(options.signal);
        return (async function* () {})();
      },
      spawn: (argv: readonly string[]) => {
        this.record("spawn", argv);
        throw new Error(`fake node ${this.node}: spawn is not scripted (${argv.slice(0, 3).join(" ")})`);
      },
    };
  }
}
