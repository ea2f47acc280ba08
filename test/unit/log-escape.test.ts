import assert from "node:assert/strict";
import { test } from "node:test";
import { containerText, escapeControls } from "../../src/cli/terminal.js";

test("a container's escape sequences reach a terminal as text, tabs and printable text as they are", () => {
  assert.equal(escapeControls("\x1b]0;owned\x07\x1b[2J\ttab ok é ✓"), "\\x1b]0;owned\\x07\\x1b[2J\ttab ok é ✓");
  assert.equal(escapeControls("bar 10%\rbar 90%"), "bar 10%\\x0dbar 90%");
  assert.equal(escapeControls("\x00\x7f\x9b31m"), "\\x00\\x7f\\x9b31m");
});

test("only a terminal gets the escaped text: a pipe or a file keeps the bytes", () => {
  const raw = "\x1b[31mred\x1b[0m";
  assert.equal(containerText({ isTTY: true })(raw), "\\x1b[31mred\\x1b[0m");
  assert.equal(containerText({ isTTY: false })(raw), raw);
  assert.equal(containerText({})(raw), raw);
});
