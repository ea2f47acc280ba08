import { createLogUpdate } from "log-update";
import { describeFigures, type BootState } from "../engine/boot-log.js";
import { describeSample, type MemorySample } from "../memory/memory-watch.js";

export interface Progress {
  node(node: string, state: BootState): void;
  /** The engine version the image reported in preflight, for the boot's record. */
  engine?(version: string): void;
  note(text: string): void;
  /** A node's memory, several times a second while the memory guard watches (src/memory/guard.ts). */
  memory?(node: string, sample: MemorySample): void;
  done(): void;
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;

/** Per-node boot phase: redrawn in place on a terminal, one line per change otherwise. */
export function progressReporter(stream: NodeJS.WriteStream, now: () => number): Progress {
  const start = now();
  const states = new Map<string, BootState>();
  const memory = new Map<string, MemorySample>();
  const tty = stream.isTTY === true && process.env.CI !== "true";
  const logUpdate = createLogUpdate(stream);
  const row = (node: string, s: BootState): string => {
    const figures = describeFigures(s.figures);
    const mem = memory.get(node);
    return `  ${node.padEnd(10)} ${s.phase.padEnd(13)} ${mem === undefined ? "" : `${describeSample(mem).padEnd(20)} `}${figures}`.trimEnd();
  };
  const redraw = (): void => logUpdate([...states].map(([n, s]) => row(n, s)).concat(`  elapsed ${seconds(now() - start)}`).join("\n"));
  const timer = tty ? setInterval(redraw, 500) : undefined;
  timer?.unref();
  return {
    node(node, state) {
      const before = states.get(node);
      states.set(node, state);
      if (tty) redraw();
      else if (before === undefined || before.phase !== state.phase || describeFigures(before.figures) !== describeFigures(state.figures)) {
        stream.write(`[${seconds(now() - start).padStart(6)}] ${row(node, state).trim()}\n`);
      }
    },
    // Several samples a second: a terminal shows the latest at its next redraw; a log gets it
    // with the node's next phase line, not a line per sample.
    memory(node, sample) {
      memory.set(node, sample);
    },
    note(text) {
      if (tty) logUpdate.clear();
      stream.write(`${text}\n`);
      if (tty) redraw();
    },
    done() {
      if (timer) clearInterval(timer);
      if (tty) logUpdate.done();
    },
  };
}

export interface TransferProgress {
  node(node: string, bytes: number, done: boolean, detail?: string): void;
  /** A line of its own: why a node's bytes take another path. */
  note?(text: string): void;
}

export const mib = (b: number): string => `${(b / 1048576).toFixed(1)} MiB`;

/** Bytes and rate per node, at most once a second per node, and once more when a node is done. */
export function transferProgress(write: (line: string) => void, now: () => number): TransferProgress {
  const start = now();
  const last = new Map<string, number>();
  return {
    node(node, bytes, done, detail) {
      const t = now();
      if (!done && t - (last.get(node) ?? 0) < 1000) return;
      last.set(node, t);
      const rate = bytes / Math.max(0.001, (t - start) / 1000);
      write(`  ${node.padEnd(10)} ${mib(bytes).padStart(12)}  ${mib(rate)}/s${done ? "  done" : ""}${detail === undefined ? "" : `  ${detail}`}`);
    },
    note: write,
  };
}

/** How a node's bytes came, as the summary line says it: "from n1 over fabric", "through this machine". */
export const describePath = (n: { path?: string; from?: string }): string =>
  n.path === undefined ? "" : n.path === "relay" || n.from === undefined ? "through this machine" : `from ${n.from} over ${n.path}`;
