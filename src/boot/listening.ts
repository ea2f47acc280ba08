/**
 * The TCP ports a Linux node listens on, read from its /proc/net/tcp and /proc/net/tcp6 (the
 * kernel's Documentation/networking/proc_net_tcp.rst: each socket's line holds "local_address" as
 * HEXIP:HEXPORT and "st", the state, 0A for LISTEN). Any address counts: a port a node listens on
 * at 0.0.0.0, at loopback or at one of its addresses is taken for a bind to loopback (Linux's
 * bind: EADDRINUSE unless both sockets set SO_REUSEPORT). Untrusted node output: the first
 * MAX_LINES lines are read, each by a bounded pattern.
 */
const MAX_LINES = 100_000;
const SOCKET_LINE = /^\s*\d{1,9}: [0-9A-Fa-f]{8,32}:([0-9A-Fa-f]{4}) [0-9A-Fa-f]{8,32}:[0-9A-Fa-f]{4} ([0-9A-Fa-f]{2}) /;
const LISTEN = "0A";

export function listeningPorts(text: string): Set<number> {
  const ports = new Set<number>();
  for (const line of text.split("\n", MAX_LINES)) {
    const m = SOCKET_LINE.exec(line);
    if (m?.[2]?.toUpperCase() === LISTEN) ports.add(Number.parseInt(m[1] ?? "", 16));
  }
  return ports;
}
