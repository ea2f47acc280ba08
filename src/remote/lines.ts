/**
 * Lines of a node's output (a container's log, `docker events`, a guard's samples) as they enter
 * this process: split as node's readline splits them, and each cut to LINE_MAX characters.
 *
 * Why 16 KiB: every line launcher reads for meaning is far shorter. vLLM's longest are its
 * `non-default args: {...}` dump (vllm/entrypoints/utils.py log_non_default_args: a dict of the
 * flags that differ, a few KiB with a long --compilation-config) and one frame of a traceback; the
 * shapes in src/engine/vllm/log-shapes.ts all sit in a line's first few hundred characters. A
 * line longer than that is a model printing or a crash dumping a tensor: its head says what it is,
 * and holding the rest (a 10 MB line from one `print`) would cost the daemon that serves every lane
 * its memory, and each pattern its time.
 */
export const LINE_MAX = 16 * 1024;

/** The head of a cut line, and how much was cut, in words a reader of the log understands. */
const withCutNote = (head: string, cut: number): string => `${head} [launcher: ${cut} more characters cut]`;

/** A line of at most LINE_MAX characters (plus the note of what was cut): its head is kept. */
export function cutLine(line: string, max = LINE_MAX): string {
  if (line.length <= max) return line;
  const head = headOf(line, 0, max);
  return withCutNote(head, line.length - head.length);
}

/** `text[from, from + n)`, one shorter when that would split a UTF-16 surrogate pair. */
function headOf(text: string, from: number, n: number): string {
  const last = text.charCodeAt(from + n - 1);
  return text.slice(from, from + (n > 0 && last >= 0xd800 && last <= 0xdbff ? n - 1 : n));
}

// node's readline ends a line at "\n", "\r\n" or a lone "\r" (lib/internal/readline/interface.js,
// lineEnding = /\r?\n|\r(?!\n)/g): the same here, so what the parsers see is unchanged. A global
// regex searched from lastIndex finds the next end in one pass over a chunk.
const LINE_END = /[\r\n]/g;

/**
 * Splits text that arrives in chunks into lines, holding at most `max` characters of the line in
 * progress: the rest of a long line is counted, not kept. Memory stays bounded by one chunk plus
 * `max`, and time is linear in the input, however long its lines.
 */
export class LineSplitter {
  private head = "";
  private cut = 0;
  /** The last chunk ended in "\r": a "\n" first in the next one belongs to that line end. */
  private pendingCR = false;

  constructor(
    private readonly onLine: (line: string) => void,
    private readonly max = LINE_MAX,
  ) {}

  push(chunk: string): void {
    let from = this.pendingCR && chunk.startsWith("\n") ? 1 : 0;
    if (chunk.length > 0) this.pendingCR = false;
    for (;;) {
      LINE_END.lastIndex = from;
      const m = LINE_END.exec(chunk);
      if (m === null) {
        this.take(chunk, from, chunk.length);
        return;
      }
      const at = m.index;
      this.take(chunk, from, at);
      this.flush();
      if (chunk[at] === "\r" && at + 1 === chunk.length) this.pendingCR = true;
      from = chunk[at] === "\r" && chunk[at + 1] === "\n" ? at + 2 : at + 1;
    }
  }

  /** The input ended: a last line without its newline is still a line (as readline has it). */
  end(): void {
    if (this.head !== "" || this.cut > 0) this.flush();
  }

  private take(chunk: string, from: number, to: number): void {
    // Once cut, the line keeps its head as it was: text from past the cut never joins it, even
    // where a surrogate pair held back left room for one more character.
    if (this.cut > 0) {
      this.cut += to - from;
      return;
    }
    const room = this.max - this.head.length;
    if (to - from <= room) {
      this.head += chunk.slice(from, to);
      return;
    }
    const kept = headOf(chunk, from, room);
    this.head += kept;
    this.cut += to - from - kept.length;
  }

  private flush(): void {
    const line = this.cut > 0 ? withCutNote(this.head, this.cut) : this.head;
    this.head = "";
    this.cut = 0;
    this.onLine(line);
  }
}

/**
 * The lines of a byte stream (a child's stdout or stderr), each cut to `max`; `onClose` once
 * it ends or is destroyed, after its last line.
 */
export function readLines(stream: NodeJS.ReadableStream, onLine: (line: string) => void, onClose: () => void, max = LINE_MAX): void {
  const splitter = new LineSplitter(onLine, max);
  let closed = false;
  const close = (): void => {
    if (closed) return;
    closed = true;
    splitter.end();
    onClose();
  };
  stream.setEncoding("utf8");
  stream.on("data", (chunk: string) => splitter.push(chunk));
  stream.on("end", close);
  stream.on("close", close);
}
