import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { argparseDumpOf, shippedDump } from "../../src/engine/argparse-dump.js";

// The engines' shipped parser tables are taken as they are at start (shippedDump): each must be
// what the format's own check accepts, and the check must give back the table unchanged (no key
// it would drop, nothing it would fill in), so that the table judged by is the table checked here.
const TABLES = ["src/engine/vllm/parser-table.json", "src/engine/sglang/parser-table.json"];

for (const file of TABLES) {
  test(`${file} is a parser description of the format, read at start exactly as the check reads it`, () => {
    const table: unknown = JSON.parse(readFileSync(file, "utf8"));
    const read = argparseDumpOf(table);
    assert.ok(read.ok, read.ok ? "" : read.problem);
    assert.deepEqual(shippedDump(table), read.dump);
    assert.ok(read.dump.actions.length > 100, "a whole parser, not a stub");
  });
}

test("a shipped table that left the format would be seen here: the check refuses a broken action", () => {
  const table = JSON.parse(readFileSync(TABLES[0] ?? "", "utf8")) as { actions: { option_strings: unknown }[] };
  (table.actions[0] as { option_strings: unknown }).option_strings = "--not-a-list";
  assert.equal(argparseDumpOf(table).ok, false);
});
