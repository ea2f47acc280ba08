import type { ClusterSession } from "../deploy/session.js";
import { clusterStatus } from "../deploy/status.js";
import type { KnownDeployment } from "./routes.js";

export interface Snapshot {
  readonly deployments: readonly KnownDeployment[];
  readonly unreachable: readonly string[];
  /** When the last poll finished; undefined before the first. */
  readonly at?: Date;
}

const describe = (d: KnownDeployment): string => `${d.deployment} ${d.status}${d.status === "booting" ? ` (${d.phase})` : ""}`;

/**
 * Polls every cluster's labels, so deployments started anywhere appear and dead ones turn
 * unavailable within one interval (plus one SSH round trip).
 */
export class Discovery {
  private current: Snapshot = { deployments: [], unreachable: [] };
  private stopped = false;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly sessions: readonly ClusterSession[],
    private readonly intervalMs: number,
    private readonly log: (line: string) => void,
  ) {}

  snapshot(): Snapshot {
    return this.current;
  }

  /** Polls once now (the first poll, or after an upstream failed). */
  async poll(): Promise<Snapshot> {
    const results = await Promise.all(
      this.sessions.map(async (s) => {
        const { deployments, unreachable } = await clusterStatus(s, new Date());
        return { deployments: deployments.map((d) => ({ ...d, cluster: s.cluster.name })), unreachable: unreachable.map((n) => `${s.cluster.name}/${n}`) };
      }),
    );
    const next: Snapshot = { deployments: results.flatMap((r) => r.deployments), unreachable: results.flatMap((r) => r.unreachable), at: new Date() };
    this.report(this.current, next);
    this.current = next;
    return next;
  }

  start(): void {
    this.loop ??= (async () => {
      while (!this.stopped) {
        try {
          await this.poll();
        } catch (e) {
          this.log(`discovery failed: ${(e as Error).message}`);
        }
        if (this.stopped) break;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.intervalMs);
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wake = undefined;
      }
    })();
  }

  /** Cuts the wait short: something looked wrong, look again now. */
  refreshSoon(): void {
    this.wake?.();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
  }

  private report(before: Snapshot, after: Snapshot): void {
    const key = (d: KnownDeployment): string => `${d.cluster}/${d.deployment}`;
    const old = new Map(before.deployments.map((d) => [key(d), d]));
    const now = new Map(after.deployments.map((d) => [key(d), d]));
    for (const [k, d] of now) {
      const was = old.get(k);
      if (was === undefined) this.log(`+ ${describe(d)}: model ${d.served_model}${d.lane === undefined ? "" : `, lane ${d.lane}`} at ${d.endpoint}`);
      else if (describe(was) !== describe(d)) this.log(`~ ${describe(d)}${d.missing.length > 0 ? `: missing ${d.missing.join("; ")}` : ""}`);
    }
    for (const [k, d] of old) if (!now.has(k)) this.log(`- ${d.deployment} gone`);
    for (const n of after.unreachable) if (!before.unreachable.includes(n)) this.log(`! ${n} unreachable`);
  }
}
