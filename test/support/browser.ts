import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";

// A real browser for the dashboard's tests: Debian's chromium (scripts/install-deps installs it),
// headless, driven by playwright-core, which downloads no browser of its own. As root (CI, the rig)
// Chromium refuses to start without --no-sandbox: its sandbox needs an unprivileged user.

/** Where Debian puts it; LAUNCHER_CHROMIUM names another. */
export const CHROMIUM = process.env.LAUNCHER_CHROMIUM ?? "/usr/bin/chromium";

/** Where a test run writes each view's screenshot, for people to look at (not compared). */
export const SCREENSHOTS = process.env.LAUNCHER_SCREENSHOTS ?? path.resolve("test-output", "screenshots");

/** Headless Chromium; the caller closes it. Its timeouts bound each step, never decide a result. */
export async function startBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`no browser at ${CHROMIUM}: run ./scripts/install-deps as root (it installs Debian's chromium), or set LAUNCHER_CHROMIUM`);
  return chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-dev-shm-usage"], timeout: 60_000 });
}

/** A fresh context (no cookie of another test's session) and its page, each step bounded by `stepMs`. */
export async function freshPage(browser: Browser, stepMs = 30_000): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  context.setDefaultTimeout(stepMs);
  const page = await context.newPage();
  // What the page threw or logged as an error: a test that fails says it.
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
  page.on("console", (m) => void (m.type() === "error" && errors.push(`console: ${m.text()}`)));
  return { context, page, errors };
}

/** The page's screenshot as `name`.png in SCREENSHOTS. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}
