import assert from "node:assert/strict";
import { closeSync, mkdirSync, openSync, writeSync } from "node:fs";
import path from "node:path";
import Database from "better-sqlite3";
import { Store } from "../../src/store/store.js";

// Real stores made by the code, then damaged page by page (the header and the schema intact), for
// the store-fault tests, unit and practice cluster alike.

export const boot = (i: number) => ({ deployment: `d${i}`, recipe: "r", recipe_hash: "abc", cluster: "c", served_model: "m", endpoint: "http://h:8000", nodes: ["n1", "n2"], started_at: "2026-01-01T00:00:00.000Z" });

/** A real store made by the code, with enough boots that its tables span many pages. */
export function storeWithBoots(file: string, count = 300): void {
  mkdirSync(path.dirname(file), { recursive: true });
  const s = new Store(file);
  for (let i = 0; i < count; i++) {
    const id = s.beginBoot(boot(i));
    s.bootPhase(id, "n1", "loading", "2026-01-01T00:00:01.000Z", { weights: "x".repeat(200) });
    s.endBoot(id, "failed", "2026-01-01T00:00:02.000Z", { node: "n1", error: `boot ${i} failed: ${"y".repeat(300)}` });
  }
  s.close();
}

/**
 * A leaf page of the boots table, never page 1 (the header) nor the schema's: "middle", the middle
 * one of its leaves in file order; "last", the leaf the next boot is written to (the rightmost in
 * the b-tree: dbstat's path, "/" then "%03x/" per level, sorts as the tree does).
 */
function leafOfBoots(file: string, which: "middle" | "last"): { pageno: number; pageSize: number } {
  const db = new Database(file, { readonly: true });
  try {
    const leaves = db.prepare(`SELECT pageno, path FROM dbstat WHERE name = 'boots' AND pagetype = 'leaf' ORDER BY pageno`).all() as { pageno: number; path: string }[];
    const pageSize = db.pragma("page_size", { simple: true }) as number;
    const pageCount = db.pragma("page_count", { simple: true }) as number;
    const chosen = which === "middle" ? leaves[Math.floor(leaves.length / 2)] : [...leaves].sort((a, b) => (a.path < b.path ? -1 : 1)).at(-1);
    const pageno = chosen?.pageno ?? 0;
    assert.ok(leaves.length > 4 && pageno > 2 && pageno <= pageCount, `${leaves.length} leaf pages, page ${pageno} of ${pageCount}`);
    return { pageno, pageSize };
  } finally {
    db.close();
  }
}

/** Garbage over one leaf page of the boots table; the header (page 1) and the schema stay intact. */
export function damageBoots(file: string, which: "middle" | "last" = "middle"): void {
  const { pageno, pageSize } = leafOfBoots(file, which);
  const fd = openSync(file, "r+");
  try {
    writeSync(fd, Buffer.alloc(pageSize, 0xa5), 0, pageSize, (pageno - 1) * pageSize);
  } finally {
    closeSync(fd);
  }
}
