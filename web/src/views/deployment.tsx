import { useMemo } from "preact/hooks";
import type { PageState } from "../state.js";
import { activityOf, bootNamed, deploymentNamed, latest, othersNamed, pointsOf } from "../state.js";
import { duration, percent, tps } from "../format.js";
import { MetricsChart } from "../figures.js";
import { CHART_METRICS } from "../figures/shape.js";
import { ActionButton, Ago, Empty, Link, Section, useNow } from "../ui.js";


/** One deployment: its ranks per node, phase, restarts and live charts of its engine's metrics. */
export function DeploymentPage(p: { state: PageState; name: string; cluster?: string }) {
  const now = useNow();
  const d = deploymentNamed(p.state, p.name, p.cluster);
  const boot = bootNamed(p.state, p.name, d?.cluster ?? p.cluster);
  const others = d === undefined ? [] : othersNamed(p.state, d);
  const points = d === undefined ? [] : pointsOf(p.state, d);
  const activity = useMemo(() => activityOf(p.state, p.name), [p.state.activity, p.name]);
  if (d === undefined) {
    return (
      <Section title={p.name}>
        <Empty>
          {p.state.loaded.has("deployments") ? "Discovery does not see this deployment (stopped, or not started yet)." : "Reading…"}{" "}
          {boot === undefined ? null : <Link to={{ view: "boot", name: p.name }}>its boot</Link>}
        </Empty>
      </Section>
    );
  }
  return (
    <div class="deployment" data-testid="deployment" data-deployment={d.deployment} data-status={d.status}>
      <Section title={d.deployment} aside={<span class="row-actions"><Link to={{ view: "logs", name: d.deployment, cluster: d.cluster }}>logs</Link>{boot === undefined ? null : <Link to={{ view: "boot", name: d.deployment, cluster: d.cluster }}>boot</Link>}<ActionButton action={{ kind: "stop", deployment: d.deployment, cluster: d.cluster }} target={d.deployment} /></span>}>
        <dl class="facts">
          <dt>status</dt><dd><span class={`state state-${d.status}`}>{d.status}</span></dd>
          <dt>phase</dt><dd>{d.phase}</dd>
          <dt>recipe</dt><dd>{d.recipe}</dd>
          <dt>lane</dt><dd>{d.lane ?? "–"}</dd>
          <dt>model</dt><dd>{d.served_model}</dd>
          <dt>endpoint</dt><dd>{d.endpoint}</dd>
          <dt>uptime</dt><dd>{d.uptime_seconds === undefined ? "–" : duration(d.uptime_seconds)}</dd>
          <dt>restarts</dt><dd data-testid="restarts">{d.restarts ?? 0}</dd>
          <dt>supervision</dt><dd>{d.supervision ?? "not supervised"}{d.restart === undefined ? "" : ` (${d.restart})`}</dd>
          <dt>now</dt><dd>{tps(latest(points, "generation_tps"))} · KV {percent(latest(points, "kv_cache_usage"))}</dd>
        </dl>
        {others.length === 0 ? null : (
          <p data-testid="same-name">
            On cluster {d.cluster}; this name runs on others too:{" "}{others.map((o) => <Link to={{ view: "deployment", name: o.deployment, cluster: o.cluster }} key={o.cluster}>{o.cluster} ({o.status})</Link>)}
          </p>
        )}
        {d.missing.length === 0 ? null : <p class="problem">Missing: {d.missing.join("; ")}</p>}
        {d.unreachable.length === 0 ? null : <p class="problem">Unreachable: {d.unreachable.join(", ")}</p>}
      </Section>
      <Section title="Ranks">
        <table>
          <thead><tr><th>rank</th><th>node</th><th>container</th><th>state</th><th>started</th></tr></thead>
          <tbody>
            {d.ranks.map((r) => (
              <tr data-testid="rank" data-node={r.node} data-rank={r.rank} key={r.rank}>
                <td>{r.rank}</td>
                <td>{r.node}</td>
                <td class="mono">{r.container}</td>
                <td><span class={`state state-${r.state}`}>{r.state}</span>{r.exit_code === undefined ? "" : ` (exit ${r.exit_code})`}</td>
                <td>{r.started_at === undefined ? "–" : <Ago at={r.started_at} now={now} />}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
      <div class="charts">
        {CHART_METRICS.map((m) => (
          <div class="card" key={m}>
            <MetricsChart metric={m} points={points} activity={activity} />
          </div>
        ))}
      </div>
    </div>
  );
}
