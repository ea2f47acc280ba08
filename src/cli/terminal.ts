/**
 * Whether this process must outlive the terminal it was started in (`launcher serve`: boots of an
 * hour must not die with a closed laptop lid or a dropped SSH session). Set once, by that command.
 */
let outliving = false;

/** The errors a write gets once its reader is gone: a closed pipe, a hung-up terminal (EIO), a stream already given up. */
export const CLOSED_OUTPUT_CODES: ReadonlySet<string> = new Set(["EPIPE", "EIO", "ERR_STREAM_DESTROYED"]);

/**
 * From now on SIGHUP is ignored and output that goes away is let go: the process goes on without
 * its terminal. A handler, not SIG_IGN (Node has no way to set that), so `onHangUp` is told.
 */
export function outliveTheTerminal(onHangUp: () => void): () => void {
  outliving = true;
  process.on("SIGHUP", onHangUp);
  return () => {
    process.off("SIGHUP", onHangUp);
    outliving = false;
  };
}

export const outlivesTheTerminal = (): boolean => outliving;
