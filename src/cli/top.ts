import type { Command } from "commander";
import type { Output } from "../app/output.js";
import type { StreamState, TopAnswers, TopPicture } from "../app/top.js";
import type { ReadEvent } from "../contract/read-api.js";
import type { DaemonTarget } from "../daemon/client.js";
import { daemonOption, readerTarget } from "./daemon-target.js";
import { EXIT_CODES } from "./interrupts.js";
import { clusterOption, jsonOption, outputOption } from "./options.js";

/** The most events kept while the routes are read (they are applied after them); past it the picture is read again. */
const MAX_BUFFERED = 10_000;
/** How long one read of the routes may take before it counts as failed. */
const READ_WAIT_MS = 10_000;
/** A closed stream is opened again after this, doubled each failed try up to RETRY_MAX_MS (a daemon restarting comes back within seconds; one gone for long is not asked more than every 10 s). */
const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 10_000;
/** A redraw at most this often (a boot's events come in bursts), and one every TICK_MS (elapsed times, the countdown). */
const FRAME_MS = 100;
const TICK_MS = 1000;

/** The wait before reconnect `attempt` (1, 2, ...). */
export const retryDelay = (attempt: number): number => Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** Math.min(Math.max(0, attempt - 1), 16));

/** Every route top reads, at once. */
async function readAll(target: DaemonTarget, signal: AbortSignal): Promise<TopAnswers> {
  const { readAnswer } = await import("../daemon/read-client.js");
  const [clusters, deployments, lanes, boots, metrics] = await Promise.all([
    readAnswer(target, "clusters", {}, signal),
    readAnswer(target, "deployments", {}, signal),
    readAnswer(target, "lanes", {}, signal),
    readAnswer(target, "boots", {}, signal),
    readAnswer(target, "metrics", {}, signal),
  ]);
  return { clusters, deployments, lanes, boots, metrics };
}

/** A read that took too long, as the user error it is; any other failure as it is (a user error says itself, a bug is a bug). */
async function named(e: unknown, target: DaemonTarget): Promise<unknown> {
  if (!(e instanceof Error && e.name === "TimeoutError")) return e;
  const { UserError } = await import("../config/errors.js");
  return new UserError(`the daemon at ${target.url} did not answer within ${READ_WAIT_MS / 1000} s`, "is it busy, or its machine unreachable? --daemon URL or $LAUNCHER_DAEMON names another");
}

/** Why a read or the stream failed, as the screen says it; anything but a user error is a bug, and thrown. */
async function whyOf(e: unknown, target: DaemonTarget): Promise<string> {
  const { UserError } = await import("../config/errors.js");
  const n = await named(e, target);
  if (n instanceof UserError) return n.message;
  throw n;
}

/** The terminal top draws on: process.stdin and process.stdout, or a test's stand-ins. */
export interface Terminal {
  readonly stdin: Pick<NodeJS.ReadStream, "isTTY" | "setRawMode" | "on" | "off" | "resume" | "pause">;
  readonly stdout: Pick<NodeJS.WriteStream, "columns" | "rows" | "on" | "off"> & NodeJS.WritableStream;
}

/** The terminal while top draws on it: the frame redrawn in place, keys read raw, all restored by end(). */
export class Screen {
  private readonly draw: ((text: string) => void) & { done(): void };
  private picture: TopPicture | undefined;
  private stream: StreamState = { kind: "live" };
  private pending: NodeJS.Timeout | undefined;
  private readonly tick: NodeJS.Timeout;
  private readonly raw: boolean;
  private readonly onResize = (): void => this.frame();

  constructor(
    logUpdate: typeof import("log-update").createLogUpdate,
    private readonly render: (p: TopPicture, s: StreamState, width: number | undefined) => string[],
    private readonly onKey: (data: Buffer) => void,
    private readonly term: Terminal = process,
  ) {
    this.draw = logUpdate(term.stdout);
    this.raw = term.stdin.isTTY === true;
    // Raw: q and Ctrl-C come as bytes, unechoed and without waiting for Enter (Node doc/api/tty.md setRawMode).
    if (this.raw) term.stdin.setRawMode(true);
    term.stdin.on("data", this.onKey);
    term.stdin.resume();
    term.stdout.on("resize", this.onResize);
    this.tick = setInterval(() => this.frame(), TICK_MS);
  }

  show(p: TopPicture, s: StreamState): void {
    this.picture = p;
    this.stream = s;
    this.pending ??= setTimeout(() => this.frame(), FRAME_MS);
  }

  private frame(): void {
    clearTimeout(this.pending);
    this.pending = undefined;
    if (this.picture === undefined) return;
    // log-update keeps a frame's last rows when it is taller than the terminal: the top matters more here.
    const rows = Math.max(1, (this.term.stdout.rows ?? 24) - 1);
    this.draw(this.render(this.picture, this.stream, this.term.stdout.columns).slice(0, rows).join("\n"));
  }

  /**
   * The last frame drawn at once, the cursor shown again, raw mode off, stdin let go. Node resets
   * the terminal's mode when the process exits (test/parallel/test-set-raw-mode-reset-process-exit.js)
   * and restore-cursor shows the cursor then; this gives the terminal back as soon as top ends.
   */
  end(): void {
    this.frame();
    clearInterval(this.tick);
    this.term.stdout.off("resize", this.onResize);
    this.draw.done();
    this.term.stdin.off("data", this.onKey);
    if (this.raw) this.term.stdin.setRawMode(false);
    this.term.stdin.pause();
  }
}

/** The routes' answers now; the first time, the cluster asked for must be one the daemon watches. */
async function readChecked(target: DaemonTarget, only: string | undefined, first: boolean, signal: AbortSignal): Promise<TopAnswers> {
  const { checkCluster } = await import("../app/top.js");
  const answers = await readAll(target, AbortSignal.any([signal, AbortSignal.timeout(READ_WAIT_MS)]));
  if (first) checkCluster(answers, only, target.url);
  return answers;
}

/** Why a stream ended: on its own (the daemon closed it), or by an error. */
type Ended = { readonly why: string } | { readonly error: unknown };

/**
 * Opens the event stream and, once the daemon has taken it, reads the routes (events that come
 * meanwhile are applied after them), then applies each event as it comes; a closed or cut stream
 * is opened again after retryDelay, and read again whole. Until `signal` aborts. A failure before
 * the first picture is the command's error (the daemon is not there, or refuses the key).
 */
async function stayLive(target: DaemonTarget, only: string | undefined, show: (p: TopPicture, s: StreamState) => void, signal: AbortSignal): Promise<void> {
  const [{ applyEvent, pictureOf }, { followEvents }, { setTimeout: sleep }] = await Promise.all([import("../app/top.js"), import("../daemon/read-client.js"), import("node:timers/promises")]);
  let picture: TopPicture | undefined;
  let attempt = 0;
  while (!signal.aborted) {
    const cut = new AbortController();
    const stop = (): void => cut.abort();
    signal.addEventListener("abort", stop, { once: true });
    // A stream whose headers never come is cut as a read that took too long.
    const late = setTimeout(() => cut.abort(new DOMException(`the daemon at ${target.url} did not open its stream`, "TimeoutError")), READ_WAIT_MS);
    const buffered: ReadEvent[] = [];
    let reading = true;
    let overflowed = false;
    const onEvent = (e: ReadEvent): void => {
      if (!reading && picture !== undefined) show((picture = applyEvent(picture, e, only)), { kind: "live" });
      else if (buffered.length < MAX_BUFFERED) buffered.push(e);
      else overflowed = true;
    };
    let open = (): void => undefined;
    const opened = new Promise<undefined>((resolve) => (open = () => resolve(undefined)));
    const streaming = followEvents(target, onEvent, cut.signal, () => (clearTimeout(late), open())).then(
      (): Ended => ({ why: `the daemon at ${target.url} ended it` }),
      (e: unknown): Ended => ({ error: cut.signal.reason instanceof DOMException ? cut.signal.reason : e }),
    );
    let ended: Ended;
    try {
      const early = await Promise.race([opened, streaming]);
      if (early !== undefined) ended = early;
      else {
        const answers = await readChecked(target, only, picture === undefined, cut.signal);
        // In one step with no await: an event that comes now is buffered and applied, or applied live.
        picture = buffered.splice(0).reduce((p, e) => applyEvent(p, e, only), pictureOf(answers, only));
        reading = false;
        show(picture, { kind: "live" });
        // Events were lost meanwhile: the picture may be behind, so it is read again.
        if (overflowed) ended = { why: `over ${MAX_BUFFERED} events came while its routes were read` };
        else {
          attempt = 0;
          ended = await streaming;
        }
      }
    } catch (e) {
      ended = { error: e };
    } finally {
      clearTimeout(late);
      cut.abort();
      signal.removeEventListener("abort", stop);
    }
    await streaming;
    if (signal.aborted) return;
    if ("error" in ended && picture === undefined) throw await named(ended.error, target);
    const why = "why" in ended ? ended.why : await whyOf(ended.error, target);
    attempt++;
    const wait = retryDelay(attempt);
    if (picture !== undefined) show(picture, { kind: "reconnecting", attempt, why, retry_at_ms: Date.now() + wait });
    await sleep(wait, undefined, { signal }).catch(() => undefined);
  }
}

/** Live on the terminal until q, Ctrl-C or a signal; the terminal is given back as it was. */
async function watchLive(target: DaemonTarget, only: string | undefined): Promise<void> {
  const [{ createLogUpdate }, { renderTop }, { colourFor }] = await Promise.all([import("log-update"), import("./top-view.js"), import("../app/colour.js")]);
  const quit = new AbortController();
  const paint = colourFor(process.stdout);
  const onKey = (data: Buffer): void => {
    // q, Q, or Ctrl-C (ETX, 0x03: in raw mode the terminal sends it rather than SIGINT).
    if (data.includes(0x71) || data.includes(0x51) || data.includes(0x03)) quit.abort();
  };
  const onSignal = (sig: NodeJS.Signals): void => {
    process.exitCode = EXIT_CODES[sig] ?? 143;
    quit.abort();
  };
  for (const sig of Object.keys(EXIT_CODES)) process.on(sig, onSignal);
  let screen: Screen | undefined;
  const render = (p: TopPicture, s: StreamState, width: number | undefined): string[] => renderTop(p, { daemon: target.url, now: Date.now(), stream: s, paint, ...(width === undefined ? {} : { width }) });
  try {
    // The terminal is taken only once there is a picture: a daemon that is not there is said as any error.
    await stayLive(target, only, (p, s) => (screen ??= new Screen(createLogUpdate, render, onKey)).show(p, s), quit.signal);
  } finally {
    screen?.end();
    for (const sig of Object.keys(EXIT_CODES)) process.off(sig, onSignal);
  }
}

export function registerTop(program: Command, io: Output): void {
  program
    .command("top")
    .description("the cluster as the daemon sees it: nodes with memory, lanes, deployments with phase and tok/s, boots in progress; redrawn live on a terminal (q or Ctrl-C ends it), one frame elsewhere")
    .addOption(daemonOption())
    .addOption(clusterOption())
    .option("--once", "draw one frame and end, as in a pipe")
    .addOption(jsonOption("print the picture once as JSON")).addOption(outputOption())
    .action(async (opts: { daemon?: string; cluster?: string; once?: boolean; json?: boolean }) => {
      const [{ clusterToShow, checkCluster, pictureOf, pictureJson }, { findCluster, clusterOf }, { readTextFile }] = await Promise.all([import("../app/top.js"), import("../app/this-process.js"), import("../config/read-file.js")]);
      const target = await readerTarget(opts.daemon, "top");
      const only = clusterToShow(opts.cluster, findCluster(opts.cluster, io.warn), (file) => clusterOf({ file, text: readTextFile(file, "cluster file") }).name);
      if (!opts.json && opts.once !== true && process.stdout.isTTY === true && (process.stdout.rows ?? 0) > 0) return watchLive(target, only);
      const answers = await readAll(target, AbortSignal.timeout(READ_WAIT_MS)).catch(async (e: unknown) => {
        throw await named(e, target);
      });
      checkCluster(answers, only, target.url);
      const picture = pictureOf(answers, only);
      if (opts.json) return io.json(pictureJson(picture, target.url));
      const { renderTop } = await import("./top-view.js");
      const width = process.stdout.isTTY === true ? process.stdout.columns : undefined;
      for (const line of renderTop(picture, { daemon: target.url, now: Date.now(), ...(width === undefined ? {} : { width }) })) io.out(line);
    });
}
