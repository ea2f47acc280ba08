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

// C0 controls but tab, DEL, and C1 controls (0x9b is a one-byte CSI on terminals that take 8-bit
// controls): the characters that move the cursor, recolour, retitle or reprogram a terminal
// (ECMA-48). Lines never hold "\n" here; "\r" is escaped too, so a line cannot draw over another.
const CONTROLS = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f]/g;

/**
 * A container's text as a terminal may show it: each control character but tab written as `\xNN`.
 * A container's output is anyone's text; written raw, its escape sequences act on the user's terminal.
 */
export const escapeControls = (text: string): string => text.replace(CONTROLS, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);

/** How text from a container is shown on `stream`: escaped when it is a terminal, as it is when piped (a file keeps the bytes). */
export const containerText = (stream: { readonly isTTY?: boolean }): ((text: string) => string) => (stream.isTTY === true ? escapeControls : (text) => text);
