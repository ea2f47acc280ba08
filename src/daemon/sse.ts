/**
 * Server-Sent Events, both ends, as the HTML standard defines the format
 * (html.spec.whatwg.org/multipage/server-sent-events.html, "Parsing an event stream" and
 * "Interpreting an event stream"): `event:` and `data:` fields, a blank line ends an event, a line
 * starting with `:` is a comment (the heartbeat), `retry:` sets the reconnection time. Framing and
 * parsing are pure; SseHub is the thin shell that writes to the clients.
 */
import type { ServerResponse } from "node:http";

export const EVENT_STREAM = "text/event-stream";

/**
 * One event. Its data is JSON on one line: JSON.stringify escapes every newline inside a string,
 * so a `data:` line never holds a line break that would split it.
 */
export const sseFrame = (event: string, data: unknown): string => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/** A comment line: ignored by every reader, it keeps idle connections (and proxies) from timing out. */
export const sseComment = (text: string): string => `: ${text.replace(/[\r\n]/g, " ")}\n\n`;

/** How long a browser's EventSource waits before it connects again after losing the stream. */
export const sseRetry = (ms: number): string => `retry: ${Math.max(0, Math.floor(ms))}\n\n`;

/** One event read back: its name ("message" when none was given) and its data lines joined by "\n". */
export interface SseEvent {
  readonly event: string;
  readonly data: string;
}

/**
 * The reader's side, fed text as it arrives. A partial line is held until its end, at most
 * `maxLine` characters: past that the stream is not one this daemon wrote, and `add` throws.
 */
export class SseParser {
  private rest = "";
  private event = "";
  private data: string[] = [];

  constructor(private readonly maxLine = 1024 * 1024) {}

  add(text: string): SseEvent[] {
    const out: SseEvent[] = [];
    // A CR at a chunk's end may be the first half of a CRLF: held until the next chunk says.
    const all = this.rest + text;
    const held = all.endsWith("\r") ? "\r" : "";
    const lines = all.slice(0, all.length - held.length).split(/\r\n|\r|\n/);
    this.rest = (lines.pop() ?? "") + held;
    if (this.rest.length > this.maxLine) throw new Error(`an event stream line is longer than ${this.maxLine} characters`);
    for (const line of lines) this.line(line, out);
    return out;
  }

  private line(line: string, out: SseEvent[]): void {
    if (line === "") {
      if (this.data.length > 0) out.push({ event: this.event === "" ? "message" : this.event, data: this.data.join("\n") });
      this.event = "";
      this.data = [];
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
  }
}

export interface SseHubOptions {
  /** The most clients at once; one more is refused (503). */
  readonly maxClients: number;
  /** The most a client may have unread; past it the client is cut (it reconnects and reads the routes again). */
  readonly maxBacklogBytes: number;
  readonly heartbeatMs: number;
  readonly retryMs: number;
}

export const SSE_DEFAULTS: SseHubOptions = { maxClients: 32, maxBacklogBytes: 1024 * 1024, heartbeatMs: 15_000, retryMs: 2_000 };

/**
 * The clients of one stream. What is sent goes to each at once; a client that reads too slowly is
 * dropped rather than buffered without end, and no client holds up another.
 */
export class SseHub {
  private readonly clients = new Set<ServerResponse>();
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(private readonly options: SseHubOptions = SSE_DEFAULTS) {}

  get size(): number {
    return this.clients.size;
  }

  /** Takes `res` as a client (headers sent); false when the hub is full and nothing was sent. */
  add(res: ServerResponse): boolean {
    if (this.clients.size >= this.options.maxClients) return false;
    res.writeHead(200, { "content-type": EVENT_STREAM, "cache-control": "no-store", "x-accel-buffering": "no" });
    res.write(sseRetry(this.options.retryMs));
    this.clients.add(res);
    res.on("close", () => this.drop(res));
    if (this.heartbeat === undefined) {
      this.heartbeat = setInterval(() => this.sendText(sseComment("heartbeat")), this.options.heartbeatMs);
      this.heartbeat.unref();
    }
    return true;
  }

  send(event: string, data: unknown): void {
    if (this.clients.size > 0) this.sendText(sseFrame(event, data));
  }

  /** Ends every client's stream (the daemon stops). */
  close(): void {
    for (const res of [...this.clients]) {
      this.drop(res);
      res.end();
    }
  }

  private sendText(text: string): void {
    for (const res of [...this.clients]) {
      if (res.destroyed || res.writableLength > this.options.maxBacklogBytes) {
        this.drop(res);
        res.destroy();
      } else res.write(text);
    }
  }

  private drop(res: ServerResponse): void {
    this.clients.delete(res);
    if (this.clients.size === 0 && this.heartbeat !== undefined) {
      clearInterval(this.heartbeat);
      this.heartbeat = undefined;
    }
  }
}
