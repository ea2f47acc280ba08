import { randomBytes } from "node:crypto";
import { createInterface } from "node:readline";
import type { RawProcess, Transport } from "../remote/transport.js";
import { control, decodeHopLine, definedEnd, endWhy, hopArgv, type HopEvent } from "./hop.js";
import type { NodeRoute } from "./route.js";

/** How long a hop may take to answer a step of the set-up (listening, connecting to the next). */
const STEP_MS = 30_000;

/** One hop as launcher sees it: its SSH session, the events it reported, and its end (exported as a type: StartedSource holds one). */
export class Hop {
  readonly events: HopEvent[] = [];
  private waiters: (() => void)[] = [];
  ended = false;
  private stderr = "";
  private code = 0;
  readonly done: Promise<{ code: number; stderr: string }>;

  constructor(
    readonly node: string,
    private readonly proc: RawProcess,
    secret: string | undefined,
    onEvent: (e: HopEvent) => void,
    /** What its sink writes (a receiver's file), for the messages: the node alone when not given. */
    where: string = node,
  ) {
    // A receiver's secret goes in on stdin, the session's own channel: never in argv, env or a log.
    if (secret !== undefined) proc.stdin.write(control.secret(secret));
    const lines = createInterface({ input: proc.stdout });
    lines.on("line", (l) => {
      const e = decodeHopLine(l);
      if (e === undefined) return;
      this.events.push(e);
      onEvent(e);
      this.wake();
    });
    this.done = proc.done.then((r) => {
      this.ended = true;
      this.code = r.code;
      this.stderr = r.code === 0 ? "" : endWhy(r.code, r.stderr, where);
      this.wake();
      return r;
    });
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** The first event from `from` on that `pick` accepts; undefined when the hop ended or the time is up. */
  async wait<T>(from: number, pick: (e: HopEvent) => T | undefined, ms = STEP_MS): Promise<T | undefined> {
    const deadline = Date.now() + ms;
    for (let seen = from; ; ) {
      for (; seen < this.events.length; seen++) {
        const v = pick(this.events[seen] as HopEvent);
        if (v !== undefined) return v;
      }
      if (this.ended || Date.now() >= deadline) return undefined;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  send(line: string): void {
    this.proc.stdin.write(line);
  }

  /** Ends the control input: the hop stops wherever it is (or ends normally when it is past it). */
  close(): void {
    this.proc.stdin.end();
  }

  kill(): void {
    this.proc.kill();
  }

  /** Ends it now, wherever it is: its control input closed and its SSH session gone (a command still running on the node ends on its broken pipe). */
  end(): void {
    this.close();
    this.kill();
  }

  error(): string | undefined {
    const e = this.events.find((x) => x.kind === "error");
    return e?.kind === "error" ? e.message : undefined;
  }

  /**
   * Why it gave no answer: what it reported or printed when it ended, else that it said nothing in
   * time. An end whose status says why (its SSH connection lost, its sink's disk full) comes before
   * the hop's own report, which only says what that did to it (a broken pipe).
   */
  silence(): string {
    if (this.ended && definedEnd(this.code)) return this.stderr;
    return this.error() ?? (this.ended ? this.stderr || "it ended" : `no answer within ${STEP_MS / 1000} s`);
  }

  doneBytes(): number | undefined {
    const e = this.events.find((x) => x.kind === "done");
    return e?.kind === "done" ? e.bytes : undefined;
  }
}

export interface ChainSource {
  readonly node: string;
  readonly transport: Transport;
  /** What writes the payload on the source (docker save, tail -c of a blob). */
  readonly command: readonly string[];
  /** A perl program the payload goes through on the source, with the chain's `filterArgs` (hop.ts, FILTER). */
  readonly filter?: string;
}

/** A source whose sending hop already runs: its command writes while the chain is still being planned. */
export interface StartedSource {
  readonly node: string;
  readonly hop: Hop;
  /** Ends it unused: its control input closed, its SSH session gone (a command still running on the node ends on its broken pipe). */
  stop(): void;
}

const sendingHop = (source: ChainSource): Hop => new Hop(source.node, source.transport.spawn(hopArgv("send", "", 0, source.command, source.filter ?? "")), undefined, () => undefined);

/** Starts the source's hop now: its command (docker save) starts writing before runChain is called. */
export function startSource(source: ChainSource): StartedSource {
  const hop = sendingHop(source);
  return {
    node: source.node,
    hop,
    stop: () => hop.end(),
  };
}

export interface ChainOptions {
  readonly signal?: AbortSignal;
  /** Called at each step, for timing them (bench/chain-loopback.ts). */
  readonly step?: (name: ChainStep) => void;
  /** The arguments of the source's filter, told to its hop before the chain is linked; none: no filter runs. */
  readonly filterArgs?: readonly string[];
}

export interface ChainReceiver extends NodeRoute {
  readonly transport: Transport;
  /** What takes the payload on the node (docker load, an append to a partial blob). */
  readonly sink: readonly string[];
  /** Bytes of the stream this node already holds (it writes only the rest, and passes all on). */
  readonly skip: number;
  /** The file the sink writes, for messages ("no space on NODE:PATH"). */
  readonly dest?: string;
}

/** The steps of a chain, in order, for timing them (bench/chain-loopback.ts). */
export type ChainStep = "listening" | "connected" | "done";

export interface ChainOutcome {
  /** Nodes that took the whole stream straight from another node, and from which. */
  readonly delivered: readonly { node: string; from: string; path: NodeRoute["path"]; bytes: number }[];
  /** Nodes no other node could reach (or that could not listen): the relay's, with why. */
  readonly unreached: readonly { node: string; why: string }[];
  /** Nodes that joined the chain but did not take it whole, with why. */
  readonly failed: readonly { node: string; why: string }[];
  readonly sent: number;
  /** What the source's payload command wrote to stderr (empty when it did not start). */
  readonly sourceSaid: string;
}

/** A receiver's hop, started, with the secret only it and the hop that connects to it know. */
interface StartedReceiver {
  readonly r: ChainReceiver;
  readonly secret: string;
  readonly hop: Hop;
}

/** A receiver that joined the chain, and the node it takes the stream from. */
interface Joined {
  readonly r: ChainReceiver;
  readonly hop: Hop;
  readonly from: string;
}

/** Where the chain's walk left off: who joined, who is the relay's, and the last hop linked. */
interface Walked {
  readonly joined: Joined[];
  readonly unreached: { node: string; why: string }[];
  readonly current: Hop;
}

/**
 * Every receiver's hop and the sender's, started. One secret per receiver, told only to it and to
 * the hop that connects to it: a node that learns one (it is on that node's stdin) can open no
 * other receiver of the chain. Whatever fails while the hops start (a command too long for a node,
 * a spawn refused) ends those already started, the given source's too: none is left holding an
 * SSH session open.
 */
function startHops(source: ChainSource | StartedSource, receivers: readonly ChainReceiver[], progress: (node: string, bytes: number, done: boolean) => void): { sender: Hop; hops: StartedReceiver[] } {
  const begun: Hop[] = "hop" in source ? [source.hop] : [];
  try {
    const hops = receivers.map((r): StartedReceiver => {
      const secret = randomBytes(32).toString("hex");
      const onEvent = (e: HopEvent): void => {
        if (e.kind === "bytes" || e.kind === "done") progress(r.node, e.bytes, e.kind === "done");
      };
      const hop = new Hop(r.node, r.transport.spawn(hopArgv("recv", r.listen, r.skip, r.sink)), secret, onEvent, r.dest === undefined ? r.node : `${r.node}:${r.dest}`);
      begun.push(hop);
      return { r, secret, hop };
    });
    return { sender: "hop" in source ? source.hop : sendingHop(source), hops };
  } catch (e) {
    for (const h of begun) h.end();
    throw e;
  }
}

/**
 * Every hop is told at once where the next one listens (a receiving hop reads that line only once
 * its own sender got in), and the last one that it is the end: the chain links itself and starts
 * pumping in one round trip from here, not one per node. Returns who told each hop (and how many
 * events that one had then), and the hop told it is the end.
 */
function tellAll(sender: Hop, hops: readonly StartedReceiver[], ports: readonly (HopEvent | undefined)[]): { told: Map<Hop, { by: Hop; mark: number }>; end: Hop | undefined } {
  const told = new Map<Hop, { by: Hop; mark: number }>();
  let before: Hop = sender;
  for (const [i, { r, secret, hop }] of hops.entries()) {
    const p = ports[i];
    if (p?.kind !== "port") continue;
    told.set(hop, { by: before, mark: before.events.length });
    before.send(control.next(r.connect, p.port, secret));
    before = hop;
  }
  const end = before === sender ? undefined : before;
  end?.send(control.last());
  return { told, end };
}

/**
 * Waits for each link in turn. Where a link fails, the hop before it is told the next address
 * instead (or, by the caller, that it is now the end); a hop that failed itself ends the walk, and
 * whoever was not asked goes to the relay too.
 */
async function walkChain(sender: Hop, hops: readonly StartedReceiver[], ports: readonly (HopEvent | undefined)[], told: ReadonlyMap<Hop, { by: Hop; mark: number }>): Promise<Walked> {
  const unreached: { node: string; why: string }[] = [];
  const joined: Joined[] = [];
  let current = sender;
  for (const [i, { r, secret, hop }] of hops.entries()) {
    const p = ports[i];
    if (p?.kind !== "port") {
      unreached.push({ node: r.node, why: `${r.node} could not listen: ${hop.silence()}` });
      hop.close();
      continue;
    }
    let mark = told.get(hop)?.by === current ? (told.get(hop)?.mark as number) : undefined;
    if (mark === undefined) {
      mark = current.events.length;
      current.send(control.next(r.connect, p.port, secret));
    }
    const answer = await current.wait(mark, (e) => (e.kind === "connected" || e.kind === "unreachable" || e.kind === "error" ? e : undefined));
    if (answer?.kind === "connected") {
      joined.push({ r, hop, from: current.node });
      current = hop;
      continue;
    }
    hop.close();
    if (answer?.kind === "unreachable") {
      unreached.push({ node: r.node, why: `${r.path} address ${r.connect}:${p.port} not reachable from ${current.node} (${answer.why})` });
      continue;
    }
    // The hop that was to connect failed itself: nothing after it can be chained.
    unreached.push({ node: r.node, why: `${current.node} could not pass the payload on: ${current.silence()}` });
    break;
  }
  for (const { r, hop } of hops) {
    if (!joined.some((j) => j.r === r) && !unreached.some((u) => u.node === r.node)) {
      unreached.push({ node: r.node, why: `the chain stopped before ${r.node}` });
      hop.close();
    }
  }
  return { joined, unreached, current };
}

/** Once the sender and every joined hop ended: who took the stream whole, and why each other did not. */
function settle(sourceNode: string, sender: Hop, sent: { code: number; stderr: string } | undefined, joined: readonly Joined[], ends: readonly { code: number; stderr: string }[]): Pick<ChainOutcome, "delivered" | "failed"> {
  const total = sender.doneBytes();
  const delivered: ChainOutcome["delivered"][number][] = [];
  const failed: { node: string; why: string }[] = [];
  for (const [i, j] of joined.entries()) {
    const end = ends[i] as { code: number; stderr: string };
    const got = j.hop.doneBytes();
    if (end.code === 0 && got !== undefined && total !== undefined && got === total && sent?.code === 0) delivered.push({ node: j.r.node, from: j.from, path: j.r.path, bytes: got });
    else {
      // The source first: when it failed (its command, its filter), each receiver's own error is only the consequence.
      const why = sent?.code !== 0 ? `the source ${sourceNode} failed: ${sender.silence()}` : end.code !== 0 ? j.hop.silence() : (j.hop.error() ?? `took ${got ?? 0} of ${total ?? "?"} bytes`);
      failed.push({ node: j.r.node, why });
    }
  }
  return { delivered, failed };
}

/**
 * Moves one stream from `source` through every receiver, node to node: each receiver listens
 * first, then launcher tells each hop in turn where the next one listens, so a node that cannot be
 * reached is skipped (and left to the relay) before any byte moves; then the source writes, and
 * each node passes on every chunk while it takes its own copy. Only report lines cross this
 * machine. `progress` gets each receiver's bytes as it reports them.
 */
export async function runChain(
  source: ChainSource | StartedSource,
  receivers: readonly ChainReceiver[],
  progress: (node: string, bytes: number, done: boolean) => void,
  options: ChainOptions = {},
): Promise<ChainOutcome> {
  const { signal, step = () => undefined, filterArgs = [] } = options;
  let argLines: string[];
  try {
    argLines = filterArgs.map(control.arg);
  } catch (e) {
    if ("hop" in source) source.stop();
    throw e;
  }
  const { sender, hops } = startHops(source, receivers, progress);
  for (const line of argLines) sender.send(line);
  const all = [sender, ...hops.map((h) => h.hop)];
  const stop = (): void => {
    for (const h of all) h.kill();
  };
  signal?.addEventListener("abort", stop, { once: true });
  if (signal?.aborted) stop();
  try {
    const ports = await Promise.all(hops.map(({ hop }) => hop.wait(0, (e) => (e.kind === "port" || e.kind === "error" ? e : undefined))));
    step("listening");
    const { told, end } = tellAll(sender, hops, ports);
    const { joined, unreached, current } = await walkChain(sender, hops, ports, told);
    if (joined.length === 0) {
      // Killed, not just told to end: its command (docker save) may still be writing Docker's
      // export, and waiting for that to end on a broken pipe would hold the relay up for as long.
      sender.end();
      await Promise.all(all.map((h) => h.done));
      return { delivered: [], unreached, failed: [], sent: 0, sourceSaid: "" };
    }
    step("connected");
    if (current !== end) current.send(control.last());
    const [sent, ...ends] = await Promise.all([sender.done, ...joined.map((j) => j.hop.done)]);
    step("done");
    for (const h of all) h.close();
    return { ...settle(source.node, sender, sent, joined, ends), unreached, sent: sender.doneBytes() ?? 0, sourceSaid: sent?.stderr ?? "" };
  } finally {
    signal?.removeEventListener("abort", stop);
    if (signal?.aborted) await Promise.all(all.map((h) => h.done));
  }
}
