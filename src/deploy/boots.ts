import { UserError } from "../config/errors.js";
import { Interrupted } from "./abort.js";
import { encodeError, FINAL_EVENTS, type UpEvent } from "./up-events.js";
import type { UpOutcome } from "./up-use-case.js";

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
 * One boot the daemon runs: every event it said from its start (so that `attach` shows it all),
 * the clients following it, and the way to cancel it. Clients come and go; the boot does not
 * notice them.
 */
export class BootEntry {
  readonly events: UpEvent[] = [];
  private readonly followers = new Set<(e: UpEvent) => void>();
  private readonly controller = new AbortController();
  private readonly detaching = new AbortController();
  private endedResolve: ((e: UpEvent) => void) | undefined;
  /** The final event (result or error), once the boot is over (its rollback included). */
  readonly ended: Promise<UpEvent> = new Promise((resolve) => (this.endedResolve = resolve));

  constructor(readonly identity: BootIdentity) {}

  get running(): boolean {
    const last = this.events.at(-1);
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
    this.events.push(e);
    for (const f of this.followers) f(e);
    if (FINAL_EVENTS.has(e.type)) {
      this.followers.clear();
      this.endedResolve?.(e);
    }
  }

  /** Hands `f` every event from the boot's start, then each new one until the end; returns the unsubscribe. */
  follow(f: (e: UpEvent) => void): () => void {
    for (const e of this.events) f(e);
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
    // The boot runs on its own: no client's connection or signal reaches it, only cancel().
    void run((e) => entry.emit(e), entry.signal, entry.detachSignal).then(
      (outcome) => entry.emit({ type: "result", outcome, t: this.now() }),
      (e: unknown) => entry.emit({ type: "error", error: encodeError(e), t: this.now() }),
    );
    return entry;
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
