import type { PageState } from "../state.js";
import { count, ms, tps } from "../format.js";
import { Ago, Empty, Section, useNow } from "../ui.js";

/** The gateway's requests, newest first, pushed as they are answered. */
export function ActivityPage(p: { state: PageState }) {
  const now = useNow();
  const rows = p.state.activity;
  return (
    <Section title="Activity">
      {rows.length === 0 ? <Empty>{p.state.loaded.has("activity") ? "No request through the gateway yet." : "Reading…"}</Empty> : (
        <table class="activity">
          <thead><tr><th>time</th><th>lane</th><th>deployment</th><th>model</th><th>key</th><th>status</th><th>TTFT</th><th>in</th><th>out</th><th>speed</th><th>why</th></tr></thead>
          <tbody>
            {rows.map((r, i) => (
              <tr data-testid="activity-row" data-status={r.status} data-lane={r.lane} class={r.status >= 400 ? "failed" : ""} key={`${r.t}-${rows.length - i}`}>
                <td><Ago at={r.t} now={now} /></td>
                <td>{r.lane ?? "–"}</td>
                <td>{r.deployment ?? "–"}</td>
                <td>{r.model}</td>
                <td class="mono">{r.key_id ?? "–"}</td>
                <td>{r.status}</td>
                <td>{ms(r.ttft_ms)}</td>
                <td>{count(r.tokens_in)}</td>
                <td>{count(r.tokens_out)}</td>
                <td>{tps(r.tokens_per_second)}</td>
                <td class="why">{r.error ?? ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Section>
  );
}
