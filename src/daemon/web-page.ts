import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";
import { PACKAGE_ROOT } from "../config/package-info.js";

/**
 * `launcher serve`'s page: the dashboard, built by scripts/build-web.ts (npm run build) into the
 * package's dist/web/ and shipped in it (no CDN: the lab may have no internet). Its HTML holds no
 * key and no code; its script signs in with `?code=` or a key typed once (./web-session-api.ts).
 * Only the files of PAGE_FILES are served, by fixed path: a request's path never becomes a file's.
 */

/** Path -> the file in dist/web/ and its type. */
export const PAGE_FILES: Readonly<Record<string, { readonly file: string; readonly type: string }>> = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/page/app.js": { file: "app.js", type: "text/javascript; charset=utf-8" },
  "/page/app.css": { file: "app.css", type: "text/css; charset=utf-8" },
};

/** Where the built page is: the package's dist/web/. */
export const PAGE_DIR = path.join(PACKAGE_ROOT, "dist", "web");

/** What `/` says when the page was not built (launcher run from its sources without npm run build). */
export const PAGE_NOT_BUILT = "the page is not built: run npm run build (it bundles web/ into dist/web/), then start launcher serve again\n";

/**
 * Every page answer's headers: only this origin's scripts, styles and requests (CSP Level 3,
 * `default-src` the fallback of every fetch directive: https://www.w3.org/TR/CSP3/#directive-default-src;
 * the page sets styles only through the CSSOM, which style-src does not govern), framed by no page
 * (`frame-ancestors` has no fallback to default-src: CSP3 #directive-frame-ancestors; and
 * X-Frame-Options for browsers without it, RFC 7034): a page on another port of the same host is
 * same-site, so SameSite=Strict would not keep it from framing a signed-in dashboard under a
 * click; no type sniffing, no Referer (the address may have held a code), never cached.
 */
export const PAGE_CSP = "default-src 'self'; frame-ancestors 'none'";
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": PAGE_CSP,
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
};

/** The page's files from `dir`, or undefined when one is missing (read once, at start). */
function readPage(dir: string): Map<string, Buffer> | undefined {
  try {
    return new Map(Object.entries(PAGE_FILES).map(([at, page]) => [at, readFileSync(path.join(dir, page.file))]));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}

/**
 * The page's answerer, its files read once here from `dir` (the built dist/web/): true when it
 * answered. Without a build, `/` answers 503 saying how to build it, and the assets are not there.
 */
export function pageServer(dir: string = PAGE_DIR): (req: IncomingMessage, res: ServerResponse, path: string) => boolean {
  const bodies = readPage(dir);
  return (req, res, at) => {
    const page = Object.hasOwn(PAGE_FILES, at) ? PAGE_FILES[at] : undefined;
    if (page === undefined || (req.method !== "GET" && req.method !== "HEAD")) return false;
    const content = bodies?.get(at);
    if (content === undefined && at !== "/") return false;
    req.resume();
    const [status, type, body] = content === undefined ? [503, "text/plain; charset=utf-8", Buffer.from(PAGE_NOT_BUILT)] : [200, page.type, content];
    res.writeHead(status, { "content-type": type, "content-length": body.length, ...PAGE_HEADERS });
    res.end(req.method === "HEAD" ? undefined : body);
    return true;
  };
}
