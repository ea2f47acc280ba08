/** How the page writes numbers and times: units always (GiB, tok/s, ms), times relative. Pure. */

const KIB_PER_GIB = 1024 * 1024;

export const gib = (kib: number): string => `${(kib / KIB_PER_GIB).toFixed(1)} GiB`;

/** `3 s ago`, `4 min ago`, `2 h ago`, `3 d ago`; `just now` under a second (and for a clock a little ahead). */
export function ago(thenMs: number, nowMs: number): string {
  const s = Math.floor((nowMs - thenMs) / 1000);
  if (!Number.isFinite(s)) return "?";
  if (s < 1) return "just now";
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

/** An ISO time as `ago`; `?` when it is not one. */
export const agoIso = (iso: string, nowMs: number): string => ago(Date.parse(iso), nowMs);

/** A duration: `850 ms`, `42 s`, `3 min 5 s`, `2 h 4 min`. */
export function duration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "?";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const s = Math.round(seconds);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

export const tps = (v: number | undefined): string => (v === undefined ? "–" : `${v < 10 ? v.toFixed(1) : Math.round(v)} tok/s`);
export const ms = (v: number | undefined): string => (v === undefined ? "–" : `${Math.round(v)} ms`);
export const percent = (v: number | undefined): string => (v === undefined ? "–" : `${Math.round(v * 100)} %`);
export const count = (v: number | undefined): string => (v === undefined ? "–" : String(v));

/** A node's memory headroom as its row says it: available against the guard's floor. */
export function headroom(memory: { readonly available_kib: number; readonly total_kib: number; readonly floor_gib: number } | undefined): { text: string; low: boolean } {
  if (memory === undefined) return { text: "not read yet", low: false };
  const available = memory.available_kib / KIB_PER_GIB;
  return { text: `${available.toFixed(1)} GiB available vs floor ${memory.floor_gib} GiB (of ${gib(memory.total_kib)})`, low: available < memory.floor_gib };
}
