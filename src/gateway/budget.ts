import type { IncomingMessage } from "node:http";

/**
 * The memory the gateway may hold for request bodies, all requests together. A body is held only
 * when the gateway must read it: a JSON body names the model that routes it, and a lane's name in
 * it is rewritten to the engine's served name (./body.ts). Form bodies stream to the engine and
 * hold nothing. On a Spark the head's memory is the GPU's too: this is what the gateway may take
 * from it, beside its idle size.
 */
export const BODY_BUDGET_BYTES = 256 * 1024 * 1024;

/** A body that stays within this much may use the whole budget; a larger one must leave SMALL_BODIES_KEEP free. */
export const SMALL_BODY_BYTES = 1024 * 1024;

/** What large bodies always leave to small ones, so that chat requests keep answering while big uploads hold the rest. */
export const SMALL_BODIES_KEEP = 32 * 1024 * 1024;

/** The largest body one request to the gateway may send (413 past it), form bodies too. */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;

/** The largest submission the control API reads: a boot's submission with its cluster file is a few KiB. */
export const MAX_CONTROL_BODY_BYTES = 1024 * 1024;

/** The first room for a body: it doubles as it fills, never past the length declared. */
const FIRST_ROOM = 64 * 1024;

/** Bytes reserved against a fixed total: pure accounting, nothing is allocated here. */
export class ByteBudget {
  #inUse = 0;

  constructor(readonly total: number) {}

  get inUse(): number {
    return this.#inUse;
  }

  /** Whether `n` bytes would be reserved now, leaving `keepFree`: nothing is reserved. */
  fits(n: number, keepFree = 0): boolean {
    return Number.isSafeInteger(n) && n >= 0 && this.#inUse + n + keepFree <= this.total;
  }

  /** Reserves `n` bytes when that leaves at least `keepFree` of the total unreserved; false (nothing reserved) otherwise. */
  tryReserve(n: number, keepFree = 0): boolean {
    if (!this.fits(n, keepFree)) return false;
    this.#inUse += n;
    return true;
  }

  release(n: number): void {
    if (n < 0 || n > this.#inUse) throw new Error(`budget: releasing ${n} bytes with ${this.#inUse} reserved`);
    this.#inUse -= n;
  }
}

/** What a body larger than SMALL_BODY_BYTES leaves free: large bodies share the budget less SMALL_BODIES_KEEP. */
export const keepFreeFor = (room: number, budget: ByteBudget): number => (room > SMALL_BODY_BYTES ? Math.min(SMALL_BODIES_KEEP, budget.total / 8) : 0);

/**
 * The room to grow to for `need` bytes: at least double (few copies), never past `limit` (the
 * declared length when there is one, so a small body reserves its own size). A body of unknown
 * length (chunked) may so hold up to twice its size, reserved: the price of copying it only
 * log2(size / FIRST_ROOM) times.
 */
export const nextRoom = (room: number, need: number, limit: number): number => Math.min(limit, Math.max(need, room * 2, FIRST_ROOM));

export type BudgetedRead =
  | { readonly kind: "body"; readonly bytes: Buffer; readonly release: () => void }
  /** Larger than one request may send. */
  | { readonly kind: "too-large"; readonly limit: number }
  /** Within the limit, but the budget has no room for it now. */
  | { readonly kind: "no-room"; readonly size: number }
  /** The client went away (or its request timed out) before the body was whole. */
  | { readonly kind: "gone" };

/**
 * Reads a request's body into one buffer, its room reserved from `budget` as its bytes arrive,
 * never ahead of them: a client that declares 60 MB and sends 2 bytes holds 64 KiB at most (Node's
 * parser delivers no more than Content-Length says, llhttp). A body declared past `limit`, or
 * that the budget cannot hold now, is refused at once, as is one that grows past either; its
 * remaining bytes are drained unread. Every end but a whole body (too large, no room, an error,
 * the client gone or its request timed out) gives back what was reserved; for a whole body the
 * caller calls `release` once it is no longer held (its request is over).
 */
export function readBudgeted(req: IncomingMessage, limit: number, budget: ByteBudget): Promise<BudgetedRead> {
  const declared = req.headers["content-length"] === undefined ? undefined : Number(req.headers["content-length"]);
  const most = declared ?? limit;
  return new Promise((resolve) => {
    let room = 0;
    let buf = Buffer.alloc(0);
    let size = 0;
    let done = false;
    const settle = (r: BudgetedRead): void => {
      if (done) return;
      done = true;
      if (r.kind !== "body") {
        budget.release(room);
        room = 0;
        buf = Buffer.alloc(0);
        req.resume();
      }
      resolve(r);
    };
    const grow = (need: number): boolean => {
      if (need <= room) return true;
      const next = nextRoom(room, need, most);
      // The old buffer stays reserved until the copy replaces it: both are held meanwhile.
      if (!budget.tryReserve(next, keepFreeFor(next, budget))) return false;
      const bigger = Buffer.allocUnsafe(next);
      buf.copy(bigger, 0, 0, size);
      budget.release(room);
      buf = bigger;
      room = next;
      return true;
    };
    if (declared !== undefined && declared > limit) return settle({ kind: "too-large", limit });
    if (declared !== undefined && !budget.fits(declared, keepFreeFor(declared, budget))) return settle({ kind: "no-room", size: declared });
    req.on("data", (c: Buffer) => {
      if (done) return;
      if (size + c.length > most) return settle({ kind: "too-large", limit });
      if (!grow(size + c.length)) return settle({ kind: "no-room", size: declared ?? size + c.length });
      c.copy(buf, size);
      size += c.length;
    });
    req.on("end", () => {
      const held = room;
      let released = false;
      settle({
        kind: "body",
        bytes: buf.subarray(0, size),
        release: () => {
          if (released) return;
          released = true;
          budget.release(held);
        },
      });
    });
    req.on("error", () => settle({ kind: "gone" }));
    req.on("close", () => {
      if (!req.complete) settle({ kind: "gone" });
    });
  });
}
