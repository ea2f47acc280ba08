import { UserError } from "../config/errors.js";
import { Interrupted } from "../config/abort.js";
import { encodeError, FINAL_EVENTS, type UpEvent } from "../boot/up-events.js";
import type { UpOutcome } from "../boot/up-events.js";

/** What a boot in the daemon is known by before it runs: its deployment, cluster and lane. */
export interface BootIdentity {
  readonly deployment: string;
  readonly cluster: string;
  readonly lane?: string;
}

/**
 * Runs the boot: says what happens through `emit`, stops (and rolls back) when `signal` aborts,
 * and stops watching, leaving what runs to the next daemon, when `detach` aborts.
 */
export type BootRun = (emit: (e: UpEvent) => void, signal: AbortSignal, detach: AbortSignal) => Promise<UpOutcome>;

/**
 * The most events a daemon keeps of one boot, for `attach`. A boot says a few dozen (its steps,
 * each node's phases); an engine whose log flips its figures or phases line after line could say
 * one per line, and a daemon holds up to 32 finished boots besides the running ones.
 */
export const MAX_BOOT_EVENTS = 1000;

/** The key of a node's or a memory event: what a later one of the same key replaces on screen. */
const progressKey = (e: UpEvent): string | undefined => (e.type === "node" ? `node ${e.node}` : e.type === "memory" ? `memory ${e.node}` : undefined);

/**
 * A boot's events cut to at most half of `max`, so that the next cut is `max / 2` events away. Kept:
 * every event but a node's and a memory one (the boot's steps, its notes, its end: what says
 * why it failed); of each node its first event in each phase (its phases and their figures, in
 * order) and its latest; its latest memory sample. If the steps alone are too many, the first and
 * the last of them, with a note of how many between were left out.
 */
export function compactEvents(events: readonly UpEvent[], max = MAX_BOOT_EVENTS): UpEvent[] {
  const latest = new Map<string, number>();
  events.forEach((e, i) => {
    const key = progressKey(e);
    if (key !== undefined) latest.set(key, i);
  });
  const phases = new Set<string>();
  const kept = events.filter((e, i) => {
    if (e.type === "memory") return latest.get(progressKey(e) as string) === i;
    if (e.type !== "node") return true;
    const first = !phases.has(`${e.node} ${e.state.phase}`);
    phases.add(`${e.node} ${e.state.phase}`);
    return first || latest.get(progressKey(e) as string) === i;
  });
  const room = Math.floor(max / 2);
  if (kept.length <= room) return kept;
  // The first event (accepted) and the last (the end) are among the head and the tail kept.
  const head = Math.ceil((room - 1) / 2);
  const tail = room - 1 - head;
  const cut = kept.length - head - tail;
  const at = kept[head] as UpEvent;
  return [...kept.slice(0, head), { type: "note", text: `(${cut} events of this boot are not kept)`, t: at.t }, ...kept.slice(kept.length - tail)];
}

/**
 * One boot the daemon runs: what it said from its start (so that `attach` shows it: every event,
 * or of a boot that said more than MAX_BOOT_EVENTS what compactEvents keeps), the clients
 * following it, and the way to cancel it. Clients come and go; the boot does not notice them.
 */
export class BootEntry {
  private kept: UpEvent[] = [];
  private readonly followers = new Set<(e: UpEvent) => void>();
  private readonly controller = new AbortController();
  private readonly detaching = new AbortController();
  private endedResolve: ((e: UpEvent) => void) | undefined;
  /** The final event (result or error), once the boot is over (its rollback included). */
  readonly ended: Promise<UpEvent> = new Promise((resolve) => (this.endedResolve = resolve));

  constructor(readonly identity: BootIdentity) {}

  get events(): readonly UpEvent[] {
    return this.kept;
  }

  get running(): boolean {
    const last = this.kept.at(-1);
    return last === undefined || !FINAL_EVENTS.has(last.type);
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get detachSignal(): AbortSignal {
    return this.detaching.signal;
  }

  emit(e: UpEvent): void {
    if (!this.running) return;
    this.kept.push(e);
    if (this.kept.length > MAX_BOOT_EVENTS) this.kept = compactEvents(this.kept);
    for (const f of this.followers) f(e);
    if (FINAL_EVENTS.has(e.type)) {
      this.followers.clear();
      this.endedResolve?.(e);
    }
  }

  /** Hands `f` every event from the boot's start, then each new one until the end; returns the unsubscribe. */
  follow(f: (e: UpEvent) => void): () => void {
    for (const e of this.kept) f(e);
    if (!this.running) return () => undefined;
    this.followers.add(f);
    return () => this.followers.delete(f);
  }

  /** Stops the boot as a signal would stop the CLI's: what it started is rolled back. Resolves once it is over. */
  cancel(by: string): Promise<UpEvent> {
    if (this.running) this.controller.abort(new Interrupted(by));
    return this.ended;
  }

  /**
   * The daemon stops: the boot is left on the nodes as it is (nothing rolled back) for the next
   * daemon to adopt; one that had started no container yet just stops. Resolves once it is over.
   */
  detach(by: string): Promise<UpEvent> {
    if (this.running) this.detaching.abort(new Interrupted(by));
    return this.ended;
  }
}

/**
 * The boots a daemon holds: one running per deployment and per lane (the store's locks are per
 * process, and every boot of a daemon is the same process, so the exclusion is here); finished
 * ones are kept for a while for a late `attach`.
 */
export class BootRegistry {
  private readonly boots: BootEntry[] = [];
  private readonly starts = new Set<(entry: BootEntry) => void>();

  constructor(
    private readonly now: () => number,
    private readonly keepFinished = 32,
  ) {}

  /** Starts `run` as the boot of `identity`, or refuses at once when one of that name or lane runs. */
  start(identity: BootIdentity, run: BootRun): BootEntry {
    const clash = this.boots.find(
      (b) => b.running && ((b.identity.cluster === identity.cluster && b.identity.deployment === identity.deployment) || (identity.lane !== undefined && b.identity.lane === identity.lane)),
    );
    if (clash !== undefined) {
      const what = clash.identity.deployment === identity.deployment ? `deployment ${identity.deployment}` : `lane ${identity.lane ?? ""}`;
      throw new UserError(`busy: ${what} is being booted by this daemon (${clash.identity.deployment})`, `launcher attach ${clash.identity.deployment} follows it; launcher down ${clash.identity.deployment} cancels it`);
    }
    const entry = new BootEntry(identity);
    this.boots.push(entry);
    this.prune();
    entry.emit({ type: "accepted", ...identity, t: this.now() });
    for (const f of this.starts) f(entry);
    // The boot runs on its own: no client's connection or signal reaches it, only cancel().
    void run((e) => entry.emit(e), entry.signal, entry.detachSignal).then(
      (outcome) => entry.emit({ type: "result", outcome, t: this.now() }),
      (e: unknown) => entry.emit({ type: "error", error: encodeError(e), t: this.now() }),
    );
    return entry;
  }

  /** Calls `f` with each boot started from now on, before it runs (the read API's stream follows it); returns the unsubscribe. */
  onStart(f: (entry: BootEntry) => void): () => void {
    this.starts.add(f);
    return () => this.starts.delete(f);
  }

  /** The latest boot of this deployment (a running one first). */
  find(deployment: string): BootEntry | undefined {
    const mine = this.boots.filter((b) => b.identity.deployment === deployment);
    return mine.find((b) => b.running) ?? mine.at(-1);
  }

  list(): readonly BootEntry[] {
    return [...this.boots];
  }

  /** Cancels every boot still running and waits for their rollbacks (the daemon is stopping). */
  async cancelAll(by: string): Promise<void> {
    await Promise.all(this.boots.filter((b) => b.running).map((b) => b.cancel(by)));
  }

  /**
   * Leaves every boot still running to the next daemon (this one is stopping) and waits for them
   * to let go, at most `ms`: a step that cannot be cut short (a drain) is left mid-way, as by kill -9.
   */
  async detachAll(by: string, ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
    await Promise.race([Promise.all(this.boots.filter((b) => b.running).map((b) => b.detach(by))), late]);
    clearTimeout(timer);
  }

  private prune(): void {
    const finished = this.boots.filter((b) => !b.running);
    for (const old of finished.slice(0, Math.max(0, finished.length - this.keepFinished))) this.boots.splice(this.boots.indexOf(old), 1);
  }
}
