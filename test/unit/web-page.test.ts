import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { build } from "esbuild";
import { PAGE_HEADERS, PAGE_NOT_BUILT, pageServer } from "../../src/daemon/web-page.js";
import { buildWeb, noNodeBuiltins } from "../../scripts/build-web.js";

// The dashboard's files as `launcher serve` answers them (src/daemon/web-page.ts) and as
// scripts/build-web.ts builds them: served by fixed path from the built folder, a 503 that says how
// to build when there is none, and a bundle with no Node code in it.

/** `fn` with a server answering through pageServer(dir) (404 where it does not answer). */
async function withPage(dir: string, fn: (url: string) => Promise<void>): Promise<void> {
  const answer = pageServer(dir);
  const server = createServer((req, res) => {
    if (!answer(req, res, new URL(req.url ?? "/", "http://x").pathname)) res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    await fn(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

test("the built page is served by fixed path, each answer under the page's headers; nothing else is", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-web-page-"));
  try {
    writeFileSync(path.join(dir, "index.html"), "<!doctype html><title>t</title>");
    writeFileSync(path.join(dir, "app.js"), "export {};");
    writeFileSync(path.join(dir, "app.css"), "body{}");
    writeFileSync(path.join(dir, "secret.txt"), "no");
    await withPage(dir, async (url) => {
      const types = { "/": "text/html; charset=utf-8", "/?code=abc": "text/html; charset=utf-8", "/page/app.js": "text/javascript; charset=utf-8", "/page/app.css": "text/css; charset=utf-8" };
      for (const [at, type] of Object.entries(types)) {
        const res = await fetch(`${url}${at}`);
        assert.equal(res.status, 200, at);
        assert.equal(res.headers.get("content-type"), type);
        for (const [name, value] of Object.entries(PAGE_HEADERS)) assert.equal(res.headers.get(name), value, `${at} ${name}`);
      }
      assert.equal(await (await fetch(`${url}/page/app.js`)).text(), "export {};");
      for (const other of ["/secret.txt", "/index.html", "/page/", "/page/../secret.txt", "/page/sign-in.js", "/constructor"]) assert.equal((await fetch(`${url}${other}`)).status, 404, other);
      assert.equal((await fetch(`${url}/`, { method: "POST" })).status, 404, "only GET and HEAD");
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("without a build, / says how to build the page (503) and the daemon still starts; its assets are not there", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-web-page-"));
  try {
    await withPage(path.join(dir, "missing"), async (url) => {
      const res = await fetch(`${url}/`);
      assert.equal(res.status, 503);
      assert.equal(await res.text(), PAGE_NOT_BUILT);
      assert.match(PAGE_NOT_BUILT, /the page is not built: run npm run build/);
      assert.equal(res.headers.get("content-security-policy"), "default-src 'self'; frame-ancestors 'none'");
      assert.equal(res.headers.get("x-frame-options"), "DENY");
      assert.equal((await fetch(`${url}/page/app.js`)).status, 404);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the page builds into one ESM bundle with its CSS and HTML, and a Node built-in reached from it fails the build", { timeout: 60_000 }, async () => {
  const out = mkdtempSync(path.join(tmpdir(), "launcher-web-build-"));
  try {
    await buildWeb(out);
    const js = readFileSync(path.join(out, "app.js"), "utf8");
    assert.doesNotMatch(js, /from\s*"node:|import\("node:|require\(/, "no Node module in the bundle");
    assert.doesNotMatch(js, /\bimport\s*[{*]?[^;]*from\s*"(?!\.)/, "every import is bundled");
    const css = readFileSync(path.join(out, "app.css"), "utf8");
    assert.match(css, /\.uplot/, "uPlot's CSS");
    assert.match(readFileSync(path.join(out, "index.html"), "utf8"), /<script type="module" src="\/page\/app.js"><\/script>/);
    const html = readFileSync(path.join(out, "index.html"), "utf8");
    assert.doesNotMatch(html, /<script>|<style|style=/, "no inline script or style: the CSP allows none");

    const src = path.join(out, "bad");
    mkdirSync(src);
    writeFileSync(path.join(src, "entry.ts"), 'import { readFileSync } from "node:fs";\nexport const x = readFileSync;\n');
    await assert.rejects(build({ entryPoints: [path.join(src, "entry.ts")], bundle: true, write: false, platform: "browser", format: "esm", logLevel: "silent", plugins: [noNodeBuiltins] }), /may not import the Node built-in "node:fs"/);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
