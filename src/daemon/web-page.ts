import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";
import { PACKAGE_ROOT } from "../config/package-info.js";

/**
 * `launcher serve`'s page: for now the sign-in page, shipped in the package's web/ folder (no CDN).
 * Its HTML holds no key and no code; its script signs in with `?code=` or a key typed once
 * (./web-session-api.ts). Only the files of PAGE_FILES are served, by fixed path: a request's path
 * never becomes a file's.
 */

/** Path -> the file in web/ and its type. */
export const PAGE_FILES: Readonly<Record<string, { readonly file: string; readonly type: string }>> = {
  "/": { file: "sign-in.html", type: "text/html; charset=utf-8" },
  "/page/sign-in.js": { file: "sign-in.js", type: "text/javascript; charset=utf-8" },
  "/page/sign-in.css": { file: "sign-in.css", type: "text/css; charset=utf-8" },
};

/**
 * Every page answer's headers: only this origin's scripts, styles and requests (CSP Level 3,
 * `default-src` the fallback of every fetch directive: https://www.w3.org/TR/CSP3/#directive-default-src),
 * no type sniffing, no Referer (the address may have held a code), never cached.
 */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": "default-src 'self'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
};

/** The page's answerer, its files read once here from `dir` (the package's web/ folder): true when it answered. */
export function pageServer(dir: string = path.join(PACKAGE_ROOT, "web")): (req: IncomingMessage, res: ServerResponse, path: string) => boolean {
  const bodies = new Map(Object.entries(PAGE_FILES).map(([at, page]) => [at, readFileSync(path.join(dir, page.file))]));
  return (req, res, at) => {
    const page = Object.hasOwn(PAGE_FILES, at) ? PAGE_FILES[at] : undefined;
    const content = bodies.get(at);
    if (page === undefined || content === undefined || (req.method !== "GET" && req.method !== "HEAD")) return false;
    req.resume();
    res.writeHead(200, { "content-type": page.type, "content-length": content.length, ...PAGE_HEADERS });
    res.end(req.method === "HEAD" ? undefined : content);
    return true;
  };
}
