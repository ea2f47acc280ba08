/** KiB in a GiB: /proc/meminfo and the node guard count KiB (proc(5)); launcher says GiB. */
export const KIB_PER_GIB = 1024 * 1024;

/** KiB as launcher's words give memory: GiB, one decimal. */
export const gibText = (kib: number): string => (kib / KIB_PER_GIB).toFixed(1);
