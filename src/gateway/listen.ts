import { isIPv4, isIPv6 } from "node:net";

export interface ListenAddress {
  readonly host: string;
  readonly port: number;
}

/** `HOST:PORT`, `[V6]:PORT`, `:PORT` or `PORT`; the host defaults to loopback. */
export function parseListen(value: string): ListenAddress | undefined {
  const m = /^(?:(?:\[([^\]]+)\]|([^:[\]]*)):)?(\d+)$/.exec(value.trim());
  if (!m) return undefined;
  const port = Number(m[3]);
  if (!Number.isInteger(port) || port > 65535) return undefined;
  const host = m[1] ?? (m[2] === undefined || m[2] === "" ? "127.0.0.1" : m[2]);
  return { host, port };
}

export function isLoopback(host: string): boolean {
  if (host === "localhost") return true;
  if (isIPv4(host)) return host.startsWith("127.");
  if (isIPv6(host)) return host === "::1" || /^::ffff:127\./i.test(host);
  return false;
}
