import assert from "node:assert/strict";
import { test } from "node:test";
import { placeOf, summarise } from "../../bench/cpuprofile-top.js";

// bench/cpuprofile-top.ts sums a V8 CPU profile's samples by function and by where the code lives.

const frame = (functionName: string, url = "", lineNumber = 0) => ({ functionName, url, lineNumber });

test("self time goes to the leaf, total time to every function on its stack once, recursion counted once", () => {
  // root -> handle -> (route -> route) and handle -> writev
  const profile = {
    nodes: [
      { id: 1, callFrame: frame("(root)"), children: [2] },
      { id: 2, callFrame: frame("handle", "file:///x/dist/gateway/server.js", 9), children: [3, 5] },
      { id: 3, callFrame: frame("route", "file:///x/dist/gateway/server.js", 20), children: [4] },
      { id: 4, callFrame: frame("route", "file:///x/dist/gateway/server.js", 20) },
      { id: 5, callFrame: frame("writev") },
    ],
    // Sample i lasts timeDeltas[i + 1] µs.
    samples: [4, 5, 2, 4],
    timeDeltas: [0, 100, 200, 300, 300],
  };
  const s = summarise(profile);
  assert.equal(s.sampledUs, 100 + 200 + 300 + 300);
  assert.equal(s.self.get("route server.js:21"), 100 + 300);
  assert.equal(s.self.get("writev"), 200);
  assert.equal(s.self.get("handle server.js:10"), 300);
  assert.equal(s.total.get("route server.js:21"), 400);
  assert.equal(s.total.get("handle server.js:10"), 900);
  assert.equal(s.places.get("launcher"), 700);
  assert.equal(s.places.get("(native)"), 200);
});

test("code is placed by where it lives", () => {
  assert.equal(placeOf("file:///w/node_modules/undici/lib/x.js", "f"), "undici");
  assert.equal(placeOf("file:///w/node_modules/@opentelemetry/api/build/x.js", "f"), "@opentelemetry/api");
  assert.equal(placeOf("node:internal/streams/writable", "f"), "node internals");
  assert.equal(placeOf("file:///w/src/gateway/proxy.ts", "f"), "launcher");
  assert.equal(placeOf("", "(garbage collector)"), "(garbage collector)");
  assert.equal(placeOf("", "writev"), "(native)");
});
