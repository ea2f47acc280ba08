import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

/** Compares text to a checked-in file; `UPDATE_GOLDEN=1 npm test` rewrites the files after a deliberate change. */
export function assertGolden(file: string, actual: string): void {
  if (process.env.UPDATE_GOLDEN === "1" || !existsSync(file)) {
    if (process.env.CI === "true" && !existsSync(file)) assert.fail(`golden file ${file} is missing`);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, actual);
    return;
  }
  assert.equal(actual, readFileSync(file, "utf8"), `${file} differs (UPDATE_GOLDEN=1 rewrites it)`);
}
