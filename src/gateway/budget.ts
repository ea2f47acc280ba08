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

/** The first room for a body whose length is not said up front (chunked); it doubles as it fills. */
const FIRST_ROOM = 64 * 1024;

/** Bytes reserved against a fixed total: pure accounting, nothing is allocated here. */
export class ByteBudget {
  #inUse = 0;

  constructor(readonly total: number) {}

  get inUse(): number {
    return this.#inUse;
  }

  /** Reserves `n` bytes when that leaves at least `keepFree` of the total unreserved; false (nothing reserved) otherwise. */
  tryReserve(n: number, keepFree = 0): boolean {
    if (!Number.isSafeInteger(n) || n < 0 || this.#inUse + n + keepFree > this.total) return false;
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

/** The room to grow to for `need` bytes: at least double (few copies), never past `limit`. */
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
 * Reads a request's body into one buffer, its room reserved from `budget` before it is allocated:
 * all of it at once when Content-Length says the size (Node's parser delivers no more than that,
 * llhttp), else growing by doubling. A body past `limit`, or one the budget cannot hold, is refused
 * at once, its remaining bytes drained unread. The caller calls `release` when the body is no
 * longer held (its request is over).
 */
export function readBudgeted(req: IncomingMessage, limit: number, budget: ByteBudget): Promise<BudgetedRead> {
  const declared = req.headers["content-length"] === undefined ? undefined : Number(req.headers["content-length"]);
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
      const next = nextRoom(room, need, limit);
      if (!budget.tryReserve(next, keepFreeFor(next, budget))) return false;
      const bigger = Buffer.allocUnsafe(next);
      buf.copy(bigger, 0, 0, size);
      budget.release(room);
      buf = bigger;
      room = next;
      return true;
    };
    if (declared !== undefined && declared > limit) return settle({ kind: "too-large", limit });
    if (declared !== undefined && !grow(declared)) return settle({ kind: "no-room", size: declared });
    req.on("data", (c: Buffer) => {
      if (done) return;
      if (size + c.length > limit) return settle({ kind: "too-large", limit });
      if (!grow(size + c.length)) return settle({ kind: "no-room", size: size + c.length });
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
