import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import * as z from "zod";
import { UserError } from "../config/errors.js";
import { DEFAULTS } from "../contract/defaults.js";
import type { Plan } from "../plan/plan.js";
import { outputTail, type Transport } from "../remote/transport.js";
import { isAlive } from "./locks.js";
import { dockerOf, type ClusterSession } from "../nodes/session.js";

/*
 * Node claims: which `up` may touch a node right now, decided by the node itself.
 *
 * Locks in this machine's store cannot see an `up` started from another machine (or under another
 * XDG_STATE_HOME): both would pass preflight on shared nodes and rendezvous with each other's ranks.
 * So each node arbitrates its own claim, and any launcher anywhere sees it over SSH.
 *
 * Where: one file, `~/.cache/launcher/claims/node`, in the SSH user's home on the node. That is the
 * one place every launcher driving the node can write without root (the cluster file names the
 * user, so launchers sharing a cluster share it); it is private to that user (mode 700: nobody else
 * can plant, delete or pre-create a claim, as anyone can in /tmp), needs no root (/run/lock,
 * /var/lock do), and no Docker object (a container name is unique too, but creating one needs an
 * image the node may not have yet). It is a cache: losing it (a reboot, a wipe) only frees the
 * node, which is right once nothing of launcher's holds it. One claim per node and user, not per
 * cluster or node name, so that two cluster files naming the same machine differently collide.
 *
 * Atomic: every read-decide-write of the claim runs under flock(1) on `claims/.lock` (util-linux,
 * Essential on Ubuntu and DGX OS; the lock is dropped by the kernel when the script's descriptor
 * closes, so a script killed midway leaves no lock behind; util-linux sys-utils/flock.1). Under
 * the lock, `take` is a compare-and-swap: it writes our record only when the current claim's id is
 * the one we expect (none, or the expired one we judged here), so two takers of one expired claim
 * cannot both win: the second finds the first's id and fails. The record is written to a temp file
 * and renamed (rename(2) is atomic), so a reader never sees half a record.
 *
 * Lease: the claim's mtime, on the node's clock (no clock skew between launcher machines matters:
 * the age is computed on the node). The holder renews it (touch) every quarter lease over the
 * shared SSH connection; a holder killed with SIGKILL or on a crashed machine stops renewing, and
 * once the claim is older than the lease its holder wrote in the record, any launcher may take it
 * over. A holder that finds its claim gone or replaced (it was frozen longer than its lease) aborts.
 * One case needs no lease: a holder on this very machine (same hostname and kernel boot id, so the
 * pid means the same process) whose pid no longer runs is dead for certain, and the user who
 * SIGKILLed an `up` and runs it again should not wait a lease for it.
 *
 * Order: claims are taken one node at a time in sorted node-name order, and all are given back on
 * the first busy node. Two `up`s whose node sets overlap both need the smallest shared node first;
 * one of them gets it and the other fails there before it touches any larger one, so exactly one
 * proceeds (never both; and never neither, as could happen if each grabbed one node of the other's
 * set). Safety (never both) holds whatever the names; "never neither" assumes both launchers name
 * the nodes alike (they share the cluster file).
 */

/** How long a claim outlives its last renewal when nothing else is said ($LAUNCHER_CLAIM_LEASE). */
export const DEFAULT_LEASE_MS = DEFAULTS.claimLease.ms;

const ClaimRecordSchema = z.object({
  id: z.string().min(1),
  host: z.string(),
  pid: z.number().int(),
  command: z.string(),
  deployment: z.string(),
  since: z.string(),
  lease_seconds: z.number().positive(),
  /** The holder machine's kernel boot id (Linux), which with `host` says whether `pid` is ours to check. */
  boot: z.string().optional(),
});

/** Who holds a node: written by the holder, shown in every "busy" message. */
export type ClaimRecord = z.infer<typeof ClaimRecordSchema>;

export const encodeClaim = (r: ClaimRecord): string => JSON.stringify(r);

/** The record, or undefined for anything else (a claim file damaged or written by a stranger). */
export function decodeClaim(text: string): ClaimRecord | undefined {
  try {
    const r = ClaimRecordSchema.safeParse(JSON.parse(text));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

/** What `take` found on the node in place of ours: the holder's id, its record, seconds since its last renewal. */
export interface HeldClaim {
  readonly id: string;
  readonly record?: ClaimRecord;
  readonly ageSeconds: number;
}

export type TakeOutcome = { readonly taken: true } | { readonly taken: false; readonly held: HeldClaim };

const TAKEN = 0;
const HELD = 3;
const LOST = 4;

/** Reads the claim script's answer to `take`. */
export function parseTake(code: number, stdout: string): TakeOutcome | undefined {
  if (code === TAKEN) return { taken: true };
  if (code !== HELD) return undefined;
  const [head = "", id = "", record = ""] = stdout.split("\n");
  const age = /^held (-?\d+)$/.exec(head.trim());
  if (age === null) return undefined;
  const decoded = decodeClaim(record);
  return { taken: false, held: { id, ageSeconds: Number(age[1]), ...(decoded === undefined ? {} : { record: decoded }) } };
}

/**
 * Whether a claim held by another may be taken over: its holder stopped renewing for longer than
 * the lease it promised. A record that cannot be read gets the default lease.
 */
export function claimExpired(held: HeldClaim, defaultLeaseMs = DEFAULT_LEASE_MS): boolean {
  const leaseSeconds = held.record?.lease_seconds ?? defaultLeaseMs / 1000;
  return held.ageSeconds > leaseSeconds;
}

/** This machine as a claim names it: hostname, and the boot id where the kernel gives one. */
export interface Machine {
  readonly host: string;
  readonly boot?: string;
}

export function thisMachine(): Machine {
  try {
    // proc(5): a random UUID made at each boot; a pid is only meaningful within one boot.
    return { host: hostname(), boot: readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() };
  } catch {
    return { host: hostname() };
  }
}

/**
 * Whether the holder is certainly dead: it ran on this machine, in this boot, and its pid is gone.
 * Without a boot id on either side nothing is certain, and the lease decides.
 */
export function holderGone(held: HeldClaim, here: Machine, runs: (pid: number) => boolean): boolean {
  const r = held.record;
  if (r?.boot === undefined || here.boot === undefined) return false;
  return r.host === here.host && r.boot === here.boot && r.pid > 0 && !runs(r.pid);
}

export function describeHolder(held: HeldClaim): string {
  const r = held.record;
  if (r === undefined) return `an unreadable claim (id ${held.id || "none"}, renewed ${held.ageSeconds} s ago)`;
  return `\`${r.command}\` (pid ${r.pid} on ${r.host}, since ${r.since}, deployment ${r.deployment})`;
}

/** The nodes in the one order every launcher takes them in. */
export const claimOrder = (nodes: readonly string[]): string[] => [...new Set(nodes)].sort();

// $1 op (take | renew | release), $2 our claim id, $3 the id we expect to replace ("" = none),
// $4 our record (one line of JSON). Exit 0 done, 3 held by another (prints "held AGE", its id,
// its record), 4 our claim is gone, anything else: the node could not do it.
export const CLAIM_SCRIPT = `set -u
dir="$HOME/.cache/launcher/claims"
mkdir -p "$dir" && chmod 700 "$dir" || exit 90
command -v flock >/dev/null 2>&1 || { echo "flock(1) not found on this node (package util-linux)" >&2; exit 91; }
exec 9>>"$dir/.lock" || exit 90
flock -w 20 9 || { echo "the claim lock stayed taken for 20 s" >&2; exit 92; }
f="$dir/node"
cur=""
[ -f "$f" ] && { IFS= read -r cur <"$f" || true; }
case "$1" in
take)
  # Free (no claim), ours already, or the expired one this launcher judged: take it.
  if [ -n "$cur" ] && [ "$cur" != "$2" ] && [ "$cur" != "$3" ]; then
    echo "held $(( $(date +%s) - $(stat -c %Y "$f") ))"
    cat "$f"
    exit ${HELD}
  fi
  printf '%s\\n%s\\n' "$2" "$4" >"$f.tmp" && mv -f "$f.tmp" "$f" || exit 90 ;;
renew)
  [ "$cur" = "$2" ] || exit ${LOST}
  touch "$f" || exit 90 ;;
release)
  [ "$cur" = "$2" ] && rm -f "$f"
  exit 0 ;;
*) exit 2 ;;
esac`;

const runScript = (t: Transport, args: readonly string[]) => t.exec(["sh", "-c", CLAIM_SCRIPT, "sh", ...args], { timeoutMs: 30_000 });

export interface ClaimOptions {
  readonly command: string;
  readonly deployment: string;
  readonly leaseMs: number;
  readonly now: () => Date;
  /** A line for the user: a takeover, a renewal that failed. */
  readonly note: (text: string) => void;
  /** How a node is named in errors (default: its name). */
  readonly where?: (node: string) => string;
  /** Called once if another launcher took a claim of ours (we failed to renew within the lease). */
  readonly onLost: (message: string) => void;
}

export interface NodeClaims {
  /** Gives every claim back and stops renewing; safe to call twice. */
  release(): Promise<void>;
}

/** Takes one node's claim, taking over an expired one; a live holder is returned. */
async function takeOne(t: Transport, id: string, record: string, leaseMs: number, here: Machine, note: (text: string) => void, where: (node: string) => string): Promise<HeldClaim | undefined> {
  let expect = "";
  // Each round either takes the claim or learns of a newer holder: bounded by the takers racing.
  for (let round = 0; round < 5; round++) {
    const r = await runScript(t, ["take", id, expect, record]);
    const outcome = parseTake(r.code, r.stdout);
    if (outcome === undefined) {
      // ssh's own failure (255) or our timeout (124): the node cannot be reached, as preflight would say.
      const why = r.code === 255 || r.code === 124 ? "SSH unreachable" : `the claim script failed (exit ${r.code})`;
      throw new UserError(`cannot claim ${where(t.node)}: ${why}: ${outputTail(r).split("\n").slice(-2).join(" ").trim()}; no container was started`, "launcher doctor checks every node");
    }
    if (outcome.taken) return undefined;
    if (holderGone(outcome.held, here, isAlive)) {
      note(`${t.node}: taking over the claim of ${describeHolder(outcome.held)}: that process no longer runs on this machine`);
    } else if (claimExpired(outcome.held, leaseMs)) {
      note(`${t.node}: taking over the expired claim of ${describeHolder(outcome.held)}, not renewed for ${outcome.held.ageSeconds} s`);
    } else {
      return outcome.held;
    }
    expect = outcome.held.id;
  }
  throw new UserError(`cannot claim ${where(t.node)}: its claim kept changing hands; no container was started`, "try again");
}

/**
 * Claims `nodes` for this process, or fails at once with "busy" naming the holder. The claims are
 * renewed until `release`; the caller releases them however it ends.
 */
export async function claimNodes(nodes: ReadonlyMap<string, Transport>, options: ClaimOptions): Promise<NodeClaims> {
  const id = randomBytes(12).toString("hex");
  const here = thisMachine();
  const record = encodeClaim({
    id,
    ...here,
    pid: process.pid,
    command: options.command,
    deployment: options.deployment,
    since: options.now().toISOString(),
    lease_seconds: Math.max(1, Math.round(options.leaseMs / 1000)),
  });
  const transports = claimOrder([...nodes.keys()]).map((n) => nodes.get(n) as Transport);
  const held: Transport[] = [];
  const giveBack = async (): Promise<void> => {
    // Best effort: a claim we cannot give back expires with its lease.
    await Promise.all(held.map((t) => runScript(t, ["release", id]).catch(() => undefined)));
  };
  try {
    for (const t of transports) {
      const holder = await takeOne(t, id, record, options.leaseMs, here, options.note, options.where ?? ((n) => n));
      if (holder !== undefined) {
        throw new UserError(
          `busy: node ${t.node} is claimed by ${describeHolder(holder)}`,
          `wait for it to finish, or stop that command (Ctrl-C in its shell rolls it back); a claim whose launcher died expires ${holder.record?.lease_seconds ?? options.leaseMs / 1000} s after its last renewal`,
        );
      }
      held.push(t);
    }
  } catch (e) {
    await giveBack();
    throw e;
  }

  let lost = false;
  let renewing: Promise<void> | undefined;
  const renew = async (): Promise<void> => {
    await Promise.all(
      held.map(async (t) => {
        const r = await runScript(t, ["renew", id]).catch((e: Error) => ({ code: -1, stdout: "", stderr: e.message }));
        if (r.code === LOST && !lost) {
          lost = true;
          options.onLost(`${t.node}: this launcher's claim on the node was taken over (it was not renewed within ${options.leaseMs / 1000} s)`);
        } else if (r.code !== 0 && r.code !== LOST) {
          options.note(`${t.node}: could not renew the claim on the node (exit ${r.code}); trying again`);
        }
      }),
    );
  };
  const timer = setInterval(() => {
    renewing ??= renew().finally(() => (renewing = undefined));
  }, Math.max(250, options.leaseMs / 4));
  timer.unref();
  let released: Promise<void> | undefined;
  return {
    release: () => {
      released ??= (async () => {
        clearInterval(timer);
        await renewing;
        await giveBack();
      })();
      return released;
    },
  };
}

/** Claims the nodes of `plan` through the session's connections (see claimNodes). */
export function claimPlanNodes(session: ClusterSession, plan: Plan, options: Omit<ClaimOptions, "deployment" | "where">): Promise<NodeClaims> {
  const hosts = new Map(plan.nodes.map((n) => [n.node, n.host]));
  return claimNodes(new Map(plan.nodes.map((n) => [n.node, dockerOf(session, n.node).transport])), {
    ...options,
    deployment: plan.deployment,
    where: (node) => `${node} (${hosts.get(node) ?? "?"})`,
  });
}
