import assert from "node:assert/strict";
import { test } from "node:test";
import { signInLink, wantsBrowser } from "../../src/cli/dashboard.js";

test("the sign-in link is the daemon's URL and a code's path, and nothing else the daemon might answer", () => {
  const code = "abcdefghijklmnopqrstuvwxyz_-0123456789ABCDE";
  assert.equal(signInLink("http://spark1:8080", `/?code=${code}`), `http://spark1:8080/?code=${code}`);
  for (const bad of ["/?code=short", `//evil.example/?code=${code}`, `/?code=${code}&x=1`, `/?code=${code} --flag`, `javascript:alert(1)`]) assert.equal(signInLink("http://spark1:8080", bad), undefined, bad);
});

test("a browser is looked for only with a display and without --no-open", () => {
  assert.equal(wantsBrowser(true, { DISPLAY: ":0" }), true);
  assert.equal(wantsBrowser(true, { WAYLAND_DISPLAY: "wayland-0" }), true);
  assert.equal(wantsBrowser(false, { DISPLAY: ":0" }), false);
  assert.equal(wantsBrowser(true, { DISPLAY: "" }), false);
  assert.equal(wantsBrowser(true, {}), false);
});
