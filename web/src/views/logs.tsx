import { useEffect, useRef, useState } from "preact/hooks";
import { decodeReadEvent, READ_PATHS, type LogLine } from "../../../src/contract/read-api.js";
import type { PageState } from "../state.js";
import { deploymentNamed } from "../state.js";
import { refusalMessage } from "../actions.js";
import { appendLog, filterLog, followQuery, logNodes } from "../logs.js";
import { Empty, Link, Section } from "../ui.js";

/** How long the view waits before it follows again after the stream broke: doubled each time it breaks again, to at most MAX_REOPEN_MS. */
const REOPEN_MS = 2000;
const MAX_REOPEN_MS = 30_000;

/** A deployment's log lines as one follow gives them, opened again from the newest line when it ends or breaks. */
function useLogFollow(name: string, onSignedOut: () => void): { lines: readonly LogLine[]; status: string } {
  const [lines, setLines] = useState<readonly LogLine[]>([]);
  const [status, setStatus] = useState("connecting…");
  const last = useRef<string | undefined>(undefined);
  useEffect(() => {
    let source: EventSource | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let left = false;
    let wait = REOPEN_MS;
    last.current = undefined;
    setLines([]);
    const open = (): void => {
      source = new EventSource(`${READ_PATHS.logs(name)}?${followQuery(last.current)}`);
      source.onopen = () => {
        wait = REOPEN_MS;
        setStatus("following");
      };
      source.addEventListener("log", (m: MessageEvent<string>) => {
        const e = decodeReadEvent("log", m.data);
        if (e?.event !== "log") return;
        if (e.data.t !== undefined) last.current = e.data.t;
        setLines((held) => appendLog(held, e.data));
      });
      const again = (why: string): void => {
        source?.close();
        if (left) return;
        setStatus(why);
        timer = setTimeout(open, wait);
        wait = Math.min(wait * 2, MAX_REOPEN_MS);
      };
      source.addEventListener("end", () => again("the follow reached its time bound: following again"));
      // EventSource would reconnect by itself from the tail again: the view does it, from the newest line.
      source.onerror = () => {
        const closed = source?.readyState === EventSource.CLOSED;
        source?.close();
        if (!closed) return again("the stream broke: following again");
        // Refused: EventSource gives no status, so the plain read (tail 0: no line) says why.
        void fetch(`${READ_PATHS.logs(name)}?tail=0`).then(
          async (r) => {
            if (r.status === 401 || r.status === 403) return onSignedOut();
            if (r.status >= 400 && r.status < 500) return setStatus(`not followed: ${refusalMessage(r.status, await r.text())}`);
            again(`the daemon refused the logs (HTTP ${r.status}): trying again`);
          },
          () => again("the daemon does not answer: trying again"),
        );
      };
    };
    open();
    return () => {
      left = true;
      clearTimeout(timer);
      source?.close();
    };
  }, [name]);
  return { lines, status };
}

/**
 * A deployment's logs merged across its nodes, followed live through one EventSource of `log`
 * events (src/daemon/read-logs.ts), closed when the view is left. When the follow ends or breaks
 * it opens again from the newest line held, so no line is read twice.
 */
export function LogsPage(p: { state: PageState; name: string; onSignedOut: () => void }) {
  const { lines, status } = useLogFollow(p.name, p.onSignedOut);
  const [node, setNode] = useState("");
  const box = useRef<HTMLDivElement>(null);
  const stick = useRef(true);

  // Keeps the newest line in view unless the reader scrolled up.
  useEffect(() => {
    const el = box.current;
    if (el !== null && stick.current) el.scrollTop = el.scrollHeight;
  }, [lines, node]);

  const d = deploymentNamed(p.state, p.name);
  const nodes = logNodes(d?.ranks.map((r) => r.node) ?? [], lines);
  const shown = filterLog(lines, node);
  const filter = (
    <span class="row-actions">
      <span class="sub">{status}</span>
      <label>
        node{" "}
        <select data-testid="log-node-filter" value={node} onChange={(e) => setNode((e.currentTarget as HTMLSelectElement).value)}>
          <option value="">all nodes</option>
          {nodes.map((n) => <option value={n} key={n}>{n}</option>)}
        </select>
      </label>
      <Link to={{ view: "deployment", name: p.name }}>deployment</Link>
    </span>
  );
  return (
    <Section title={`Logs of ${p.name}`} aside={filter}>
      <div class="log" ref={box} onScroll={(e) => { const el = e.currentTarget as HTMLDivElement; stick.current = el.scrollTop + el.clientHeight >= el.scrollHeight - 8; }}>
        {shown.length === 0 ? <Empty>No line yet.</Empty> : shown.map((l, i) => (
          <div class="log-line" data-testid="log-line" data-node={l.node} key={i}>
            <span class="log-node">{l.node}/{l.rank}</span>
            <span class="log-time">{l.t === undefined ? "" : l.t.slice(11, 23)}</span>
            <span class="log-text">{l.text}</span>
          </div>
        ))}
      </div>
    </Section>
  );
}
