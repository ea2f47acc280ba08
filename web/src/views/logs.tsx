import { useEffect, useRef, useState } from "preact/hooks";
import { decodeReadEvent, READ_PATHS } from "../../../src/contract/read-api.js";
import type { PageState } from "../state.js";
import { deploymentNamed } from "../state.js";
import { refusalMessage } from "../actions.js";
import { appendLog, filterLog, followQuery, isResent, logNodes, resumeFrom, withNewest, type HeldLine } from "../logs.js";
import { Empty, Link, Section } from "../ui.js";

/** How long the view waits before it follows again after the stream broke: doubled each time it breaks again, to at most MAX_REOPEN_MS. */
const REOPEN_MS = 2000;
const MAX_REOPEN_MS = 30_000;

/** A deployment's log lines as one follow gives them, opened again when it ends or breaks from where the slowest node's lines stopped. */
function useLogFollow(name: string, cluster: string | undefined, onSignedOut: () => void): { lines: readonly HeldLine[]; status: string } {
  const [lines, setLines] = useState<readonly HeldLine[]>([]);
  const [status, setStatus] = useState("connecting…");
  // Each node's newest line: a follow opened again starts from the oldest of them (./logs.ts resumeFrom).
  const newest = useRef<ReadonlyMap<string, string>>(new Map());
  const seq = useRef(0);
  useEffect(() => {
    let source: EventSource | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let left = false;
    let wait = REOPEN_MS;
    newest.current = new Map();
    setLines([]);
    const on = cluster === undefined ? "" : `&${new URLSearchParams({ cluster }).toString()}`;
    const open = (): void => {
      source = new EventSource(`${READ_PATHS.logs(name)}?${followQuery(resumeFrom(newest.current))}${on}`);
      source.onopen = () => {
        wait = REOPEN_MS;
        setStatus("following");
      };
      source.addEventListener("log", (m: MessageEvent<string>) => {
        const e = decodeReadEvent("log", m.data);
        if (e?.event !== "log") return;
        const line = { ...e.data, seq: seq.current++ };
        const known = newest.current;
        newest.current = withNewest(known, line);
        setLines((held) => (isResent(held, known, line) ? held : appendLog(held, line)));
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
        void fetch(`${READ_PATHS.logs(name)}?tail=0${on}`).then(
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
  }, [name, cluster]);
  return { lines, status };
}

/**
 * A deployment's logs merged across its nodes, followed live through one EventSource of `log`
 * events (src/daemon/read-logs.ts), closed when the view is left. When the follow ends or breaks
 * it opens again from the oldest of the nodes' newest lines, so a lagging node loses none, and a
 * line another node sends again is dropped.
 */
export function LogsPage(p: { state: PageState; name: string; cluster?: string; onSignedOut: () => void }) {
  const { lines, status } = useLogFollow(p.name, p.cluster, p.onSignedOut);
  const [node, setNode] = useState("");
  const box = useRef<HTMLDivElement>(null);
  const stick = useRef(true);

  // Keeps the newest line in view unless the reader scrolled up.
  useEffect(() => {
    const el = box.current;
    if (el !== null && stick.current) el.scrollTop = el.scrollHeight;
  }, [lines, node]);

  const d = deploymentNamed(p.state, p.name, p.cluster);
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
      <Link to={{ view: "deployment", name: p.name, ...(p.cluster === undefined ? {} : { cluster: p.cluster }) }}>deployment</Link>
    </span>
  );
  return (
    <Section title={`Logs of ${p.name}`} aside={filter}>
      <div class="log" ref={box} onScroll={(e) => { const el = e.currentTarget as HTMLDivElement; stick.current = el.scrollTop + el.clientHeight >= el.scrollHeight - 8; }}>
        {shown.length === 0 ? <Empty>No line yet.</Empty> : shown.map((l) => (
          <div class="log-line" data-testid="log-line" data-node={l.node} key={l.seq}>
            <span class="log-node">{l.node}/{l.rank}</span>
            <span class="log-time">{l.t === undefined ? "" : l.t.slice(11, 23)}</span>
            <span class="log-text">{l.text}</span>
          </div>
        ))}
      </div>
    </Section>
  );
}
