import type { BootView, PageState } from "../state.js";
import { latest, pointsOf } from "../state.js";
import type { ClusterView, DeploymentView, LaneView } from "../../../src/contract/read-api.js";
import { duration, headroom, tps } from "../format.js";
import { ActionButton, Ago, Empty, Link, Section, useNow } from "../ui.js";

/** The cluster at a glance: nodes with memory headroom against their floor, lanes and what serves them, deployments, boots. */
export function Overview(p: { state: PageState }) {
  const { state } = p;
  const now = useNow();
  return (
    <div class="overview">
      <Section title="Nodes">{state.clusters.length === 0 ? <Empty>No cluster yet.</Empty> : state.clusters.map((c) => <Nodes cluster={c} now={now} key={c.name} />)}</Section>
      <Section title="Lanes">
        {state.lanes.length === 0 ? <Empty>No lane.</Empty> : (
          <table>
            <thead><tr><th>lane</th><th>state</th><th>deployment</th><th>recipe</th><th>since</th><th /></tr></thead>
            <tbody>{state.lanes.map((l) => <LaneRow lane={l} now={now} key={l.name} />)}</tbody>
          </table>
        )}
      </Section>
      <Section title="Deployments" aside={<ActionButton action={{ kind: "start" }} />}>
        {state.deployments.length === 0 ? <Empty>Nothing runs.</Empty> : (
          <table>
            <thead><tr><th>deployment</th><th>status</th><th>phase</th><th>recipe</th><th>lane</th><th>ranks</th><th>restarts</th><th>uptime</th><th>generation</th><th /></tr></thead>
            <tbody>{state.deployments.map((d) => <DeploymentRow d={d} state={state} key={`${d.cluster}/${d.deployment}`} />)}</tbody>
          </table>
        )}
      </Section>
      <Section title="Boots">
        {state.boots.length === 0 ? <Empty>The daemon runs no boot.</Empty> : (
          <table>
            <thead><tr><th>deployment</th><th>state</th><th>nodes</th><th>lane</th><th>started</th><th /></tr></thead>
            <tbody>{state.boots.map((b) => <BootRow boot={b} now={now} key={`${b.cluster}/${b.deployment}`} />)}</tbody>
          </table>
        )}
      </Section>
    </div>
  );
}

function Nodes(p: { cluster: ClusterView; now: number }) {
  return (
    <div class="cluster">
      <h3>{p.cluster.name}</h3>
      <ul class="nodes">
        {p.cluster.nodes.map((n) => {
          const room = headroom(n.memory);
          const reachable = n.reachable === true;
          const share = n.memory === undefined ? 0 : n.memory.available_kib / Math.max(1, n.memory.total_kib);
          const floor = n.memory === undefined ? 0 : (n.memory.floor_gib * 1024 * 1024) / Math.max(1, n.memory.total_kib);
          return (
            <li class={`node ${reachable ? "up" : "down"}`} data-testid="node" data-node={n.name} data-reachable={String(reachable)} key={n.name}>
              <span class="node-name">{n.name}</span>
              <span class="badge">{n.reachable === undefined ? "not polled yet" : reachable ? "reachable" : n.outage === undefined ? "unreachable" : `${n.outage.kind} since`}</span>
              {!reachable && n.outage !== undefined ? <span class="outage" data-testid="node-outage" data-kind={n.outage.kind}><Ago at={n.outage.since} now={p.now} /></span> : null}
              <span class={`headroom ${room.low ? "low" : ""}`} data-testid="memory-headroom">{room.text}</span>
              <span class="meter" title="available memory; the mark is the floor">
                {/* Preact sets style through the element's CSSOM (never a style attribute), which the CSP allows. */}
                <span class="meter-fill" style={{ width: `${Math.round(share * 100)}%` }} />
                <span class="meter-floor" style={{ left: `${Math.round(Math.min(1, floor) * 100)}%` }} />
              </span>
            </li>
          );
        })}
      </ul>
    </div>
  );
}

const LANE_TEXT: Readonly<Record<LaneView["state"], string>> = { serving: "serving", switching: "switching", empty: "empty" };

function LaneRow(p: { lane: LaneView; now: number }) {
  const l = p.lane;
  return (
    <tr data-testid="lane" data-lane={l.name} data-state={l.state}>
      <td>{l.name}</td>
      <td><span class={`state state-${l.state}`}>{LANE_TEXT[l.state]}{l.switching_to === undefined ? "" : ` to ${l.switching_to}`}</span></td>
      <td>{l.deployment === undefined ? "–" : <Link to={{ view: "deployment", name: l.deployment }} testid="lane-deployment">{l.deployment}</Link>}</td>
      <td>{l.recipe ?? "–"}</td>
      <td><Ago at={l.since} now={p.now} /></td>
      <td><ActionButton action={{ kind: "swap", lane: l.name }} target={l.name} /></td>
    </tr>
  );
}

function DeploymentRow(p: { d: DeploymentView; state: PageState }) {
  const d = p.d;
  return (
    <tr data-testid="deployment-row" data-deployment={d.deployment} data-status={d.status}>
      <td><Link to={{ view: "deployment", name: d.deployment, cluster: d.cluster }}>{d.deployment}</Link></td>
      <td><span class={`state state-${d.status}`}>{d.status}</span>{d.supervision === undefined ? null : <span class="sub"> · {d.supervision}</span>}</td>
      <td>{d.phase}</td>
      <td>{d.recipe}</td>
      <td>{d.lane ?? "–"}</td>
      <td>{d.ranks.length}</td>
      <td>{d.restarts ?? 0}</td>
      <td>{d.uptime_seconds === undefined ? "–" : duration(d.uptime_seconds)}</td>
      <td>{tps(latest(pointsOf(p.state, d), "generation_tps"))}</td>
      <td class="row-actions"><Link to={{ view: "logs", name: d.deployment }}>logs</Link> <ActionButton action={{ kind: "stop", deployment: d.deployment, cluster: d.cluster }} target={d.deployment} /></td>
    </tr>
  );
}

const BOOT_TEXT: Readonly<Record<BootView["state"], string>> = { booting: "booting", ready: "ready", failed: "failed" };

function BootRow(p: { boot: BootView; now: number }) {
  const b = p.boot;
  return (
    <tr data-testid="boot-row" data-deployment={b.deployment} data-state={b.state}>
      <td><Link to={{ view: "boot", name: b.deployment }}>{b.deployment}</Link></td>
      <td><span class={`state state-${b.state}`}>{BOOT_TEXT[b.state]}</span></td>
      <td>{Object.entries(b.nodes).map(([node, phase]) => `${node}: ${phase}`).join(" · ") || "–"}</td>
      <td>{b.lane ?? "–"}</td>
      <td><Ago at={b.started_at} now={p.now} /></td>
      <td>{b.state === "booting" ? <ActionButton action={{ kind: "cancel", deployment: b.deployment }} target={b.deployment} /> : null}</td>
    </tr>
  );
}
