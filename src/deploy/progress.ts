import { createLogUpdate } from "log-update";
import { describeFigures, type BootState } from "../engine/boot-log.js";

export interface Progress {
  node(node: string, state: BootState): void;
  note(text: string): void;
  done(): void;
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;

/** Per-node boot phase: redrawn in place on a terminal, one line per change otherwise. */
export function progressReporter(stream: NodeJS.WriteStream, now: () => number): Progress {
  const start = now();
  const states = new Map<string, BootState>();
  const tty = stream.isTTY === true && process.env.CI !== "true";
  const logUpdate = createLogUpdate(stream);
  const row = (node: string, s: BootState): string => {
    const figures = describeFigures(s.figures);
    return `  ${node.padEnd(10)} ${s.phase.padEnd(13)} ${figures}`;
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
