import { createHash } from "node:crypto";
import { chmodSync, lstatSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import path from "node:path";
import { UserError } from "../config/errors.js";
import { privateRuntimeDir } from "../config/private-dir.js";
import { CONTROL_PREFIX } from "../contract/control-api.js";

/*
 * The daemon's control API for its own user: a Unix socket, mode 0600, in a runtime folder of
 * this uid (mode 0700, owned by it, not a link: src/config/private-dir.ts), as Docker's and
 * Podman's rootless sockets are. Linux checks write permission on the socket file and search
 * permission on every folder above it at connect(2) (unix(7), "Pathname socket ownership and
 * permissions"), so no other uid but root gets through: the socket stands for "this user", which
 * a loopback TCP port, open to every local uid, never does.
 */

/**
 * The socket of the daemon whose state folder is `stateDir`: one per store (two daemons on two
 * stores never share one), in the runtime folder, whose short path keeps the name under the 108
 * bytes of sun_path.
 */
export function controlSocketPath(stateDir: string): string {
  const dir = privateRuntimeDir("daemon", "the daemon's control socket");
  return path.join(dir, `control-${createHash("sha256").update(path.resolve(stateDir)).digest("hex").slice(0, 12)}.sock`);
}

/** A control socket listening: where, and how to stop it (the socket file goes with it). */
export interface ControlSocket {
  readonly path: string;
  close(): Promise<void>;
}

/**
 * Serves `control` (the control API, built with `ownerSocket`) on the socket of `stateDir`. A
 * socket left by a daemon of this store that died is removed first; anything else there is not
 * touched.
 */
export async function listenControlSocket(stateDir: string, control: (req: IncomingMessage, res: ServerResponse, path: string) => Promise<void>, requestTimeoutMs: number): Promise<ControlSocket> {
  const socket = controlSocketPath(stateDir);
  try {
    if (lstatSync(socket).isSocket()) rmSync(socket, { force: true });
  } catch {
    // Nothing there.
  }
  const server = createServer({ requestTimeout: requestTimeoutMs }, (req, res) => {
    const p = (req.url ?? "/").split("?")[0] ?? "/";
    if (p.startsWith(CONTROL_PREFIX)) {
      void control(req, res, p);
      return;
    }
    req.resume();
    res.writeHead(404, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { message: `the control socket serves ${CONTROL_PREFIX} only`, type: "control_error", code: "not_found" } }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (e: NodeJS.ErrnoException) => reject(new UserError(`cannot listen on the control socket ${socket} (${e.code ?? e.message})`, "is another launcher serve --control running on this state folder? Stop it, or set XDG_STATE_HOME to another folder")));
    server.listen(socket, resolve);
  });
  // The folder (0700) already keeps others out between bind and here; the mode says it again.
  chmodSync(socket, 0o600);
  return {
    path: socket,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        rmSync(socket, { force: true });
      }),
  };
}
