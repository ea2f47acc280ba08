import { isIPv4 } from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import { SSH_FAILED, UnreachableError, type Transport } from "../remote/transport.js";

/*
 * A head that connects to its workers once, at its start (EngineAdapter.headAwaitsWorkersPort)
 * starts only once each worker's port accepts a TCP connection made from the head's own node: the
 * control machine may not reach the fabric network, and a worker's log cannot say it listens (a
 * C program's stdout on a pipe is fully buffered, so its lines reach `docker logs` only at its next
 * fflush or exit).
 */

/** How long one probe may take to connect (a host that drops packets never answers). */
export const PROBE_SECONDS = 2;
/** Between two probes of a port that refused. */
export const PROBE_INTERVAL_MS = 500;
// Bounds the SSH round trip of one probe too: ssh's own connection plus the probe's time.
const PROBE_EXEC_MS = 10_000;

/** One worker whose port the head waits for. */
export interface PortAwaited {
  readonly node: string;
  readonly rank: number;
  readonly ip: string;
  readonly port: number;
}

/**
 * The workers' ports: master_port at each one's fabric IP (where the engine's worker listens), from
 * the cluster file; the plan refused a worker without one.
 */
export function awaitedPorts(port: number, cluster: readonly { readonly name: string; readonly fabric_ip?: string }[], workers: readonly string[], rankOf: (node: string) => number): PortAwaited[] {
  return workers.map((node) => {
    const ip = cluster.find((n) => n.name === node)?.fabric_ip;
    if (ip === undefined) throw new Error(`node ${node} has no fabric_ip for its head to reach`);
    return { node, rank: rankOf(node), ip, port };
  });
}

/**
 * The probe, run on the head's node: bash's /dev/tcp/HOST/PORT redirection connects (bash's
 * lib/sh/netopen.c), and coreutils' timeout(1) bounds it (exit 124). IP and port are positional
 * parameters of the script, never part of it; the transport quotes every word (shellQuote).
 */
export function portProbeArgv(ip: string, port: number): string[] {
  if (!isIPv4(ip) || !Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`no port to probe at ${ip}:${port}`);
  return ["timeout", String(PROBE_SECONDS), "bash", "-c", 'exec 3<>"/dev/tcp/$1/$2"', "launcher-port-probe", ip, String(port)];
}

/** One probe from the head's node: true once the port accepts; the head's node unreachable throws. */
export async function probePort(head: Transport, ip: string, port: number, signal: AbortSignal): Promise<boolean> {
  const r = await head.exec(portProbeArgv(ip, port), { signal, timeoutMs: PROBE_EXEC_MS, maxChars: 4096 });
  // 124 is timeout(1)'s (or our own bound's): no answer yet, as a refusal (bash exits 1) is.
  if (r.code === SSH_FAILED) throw new UnreachableError(head.node, r.stderr.trim().split("\n").slice(-1)[0] || `ssh exit ${r.code}`);
  return r.code === 0;
}

/**
 * Until every worker's port accepts, in rank order; `waiting` names the one waited for now (the
 * boot's timeout blames it), undefined once all accept. Ends with `until` (the watch's failure,
 * bounded by the boot's timeout).
 */
export async function awaitPorts(
  workers: readonly PortAwaited[],
  probe: (w: PortAwaited) => Promise<boolean>,
  until: Promise<never>,
  waiting: (w: PortAwaited | undefined) => void,
  intervalMs = PROBE_INTERVAL_MS,
): Promise<void> {
  for (const w of workers) {
    waiting(w);
    while (!(await Promise.race([probe(w), until]))) {
      // Unref'd: a wait that `until` ended leaves no timer holding the process.
      await Promise.race([delay(intervalMs, undefined, { ref: false }), until]);
    }
  }
  waiting(undefined);
}
