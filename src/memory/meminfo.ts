/**
 * /proc/meminfo, read. The kernel writes one `Key:  value kB` line per figure
 * (fs/proc/meminfo.c, show_val_kb); MemAvailable exists since Linux 3.14 and is the kernel's own
 * estimate of what can be allocated without swapping, page cache it can drop included
 * (mm/page_alloc.c si_mem_available). On a DGX Spark the GPU allocates from the same pool, so these
 * figures are the GPU's memory too.
 */
export interface Meminfo {
  readonly totalKiB: number;
  readonly availableKiB: number;
  readonly freeKiB: number;
  /** Page cache of files (Cached + Buffers, without Shmem): what `drop_caches` can free, when clean. */
  readonly cachedKiB: number;
  /** tmpfs and shared memory (/dev/shm): counted in Cached by the kernel, but no cache drop frees it. */
  readonly shmemKiB: number;
  /** Kernel slab the kernel can reclaim (dentries, inodes): `drop_caches` frees it too. */
  readonly reclaimableSlabKiB: number;
}

export type MeminfoResult = { readonly ok: true; readonly meminfo: Meminfo } | { readonly ok: false; readonly missing: readonly string[] };

const REQUIRED = ["MemTotal", "MemAvailable", "MemFree"] as const;

/** Pure: the text of /proc/meminfo -> its figures; a text lacking MemTotal, MemAvailable or MemFree is not meminfo. */
export function parseMeminfo(text: string): MeminfoResult {
  const kib = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^(\w+(?:\(\w+\))?):\s+(\d+)(?: kB)?\s*$/.exec(line);
    if (m) kib.set(m[1] as string, Number(m[2]));
  }
  const missing = REQUIRED.filter((k) => !kib.has(k));
  if (missing.length > 0) return { ok: false, missing };
  const get = (k: string): number => kib.get(k) ?? 0;
  const shmem = get("Shmem");
  return {
    ok: true,
    meminfo: {
      totalKiB: get("MemTotal"),
      availableKiB: get("MemAvailable"),
      freeKiB: get("MemFree"),
      cachedKiB: Math.max(0, get("Cached") + get("Buffers") - shmem),
      shmemKiB: shmem,
      reclaimableSlabKiB: get("SReclaimable"),
    },
  };
}

export { KIB_PER_GIB } from "../contract/units.js";

/**
 * Meminfo as `--json` prints it (`launcher doctor`): snake_case keys with the unit in the key's
 * tail, the one key style of every JSON answer. The store keeps its own encoding of Meminfo.
 */
export interface MeminfoJson {
  readonly total_kib: number;
  readonly available_kib: number;
  readonly free_kib: number;
  readonly cached_kib: number;
  readonly shmem_kib: number;
  readonly reclaimable_slab_kib: number;
}

export const meminfoJson = (m: Meminfo): MeminfoJson => ({
  total_kib: m.totalKiB,
  available_kib: m.availableKiB,
  free_kib: m.freeKiB,
  cached_kib: m.cachedKiB,
  shmem_kib: m.shmemKiB,
  reclaimable_slab_kib: m.reclaimableSlabKiB,
});
