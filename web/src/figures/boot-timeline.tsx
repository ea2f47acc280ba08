import { useMemo } from "preact/hooks";
import { duration, gib } from "../format.js";
import { PhaseLegend, pct } from "./parts.js";
import { layoutBoot, phaseClass, readBootEvents, type BootShape, type BootView, type NodeTimeline, type RootCause } from "./shape.js";

function Axis(p: { shape: BootShape }) {
  return (
    <div class="fig-axis" aria-hidden="true">
      {p.shape.ticks.map((t) => (
        // A label near the end is set to the left of its tick, so that it stays inside the figure.
        <span class={t.at > 0.9 ? "fig-tick fig-tick-end" : "fig-tick"} key={t.at} style={{ left: pct(t.at) }}>
          {t.label}
        </span>
      ))}
    </div>
  );
}

function NodeRow(p: { n: NodeTimeline }) {
  const { n } = p;
  return (
    <div class="fig-boot-node" data-testid="boot-node" data-node={n.node} data-phase={n.phase}>
      <div class="fig-boot-label">
        <span class="fig-node-name">{n.node}</span> <span class={`fig-phase-name ${phaseClass(n.phase)}`}>{n.phase}</span>
        {n.dropped > 0 ? <span class="fig-note"> ({n.dropped} earlier phases not drawn)</span> : null}
      </div>
      <div class="fig-track">
        {n.segments.map((s, i) => (
          <div
            key={`${i}-${s.start}`}
            class={`fig-seg ${phaseClass(s.phase)}${s.running ? " fig-running" : ""}${s.restart ? " fig-restart" : ""}`}
            data-testid="phase-segment"
            data-phase={s.phase}
            style={{ left: pct(s.left), width: pct(s.width) }}
            title={`${s.phase}${s.restart ? " (started over)" : ""}${s.byResult ? " (the boot is ready: its head answered /health)" : ""}: ${duration((s.end - s.start) / 1000)}${s.running ? " so far" : ""}`}
          />
        ))}
      </div>
      <dl class="fig-figures">
        {n.figures.map(([k, v]) => (
          <div class="fig-figure" data-testid="figure" data-name={k} key={k}>
            <dt>{k}</dt>
            <dd>{v}</dd>
          </div>
        ))}
        {n.memory === undefined ? null : (
          <div class="fig-figure fig-memory">
            <dt>least memory available</dt>
            <dd>{gib(n.memory.minAvailableKiB)} of {gib(n.memory.totalKiB)}</dd>
          </div>
        )}
      </dl>
    </div>
  );
}

function Cause(p: { cause: RootCause }) {
  const { cause } = p;
  return (
    <div class="fig-cause" data-testid="root-cause" data-node={cause.node}>
      <p class="fig-cause-message">{cause.message}</p>
      {cause.hint === undefined ? null : <p class="fig-cause-hint">hint: {cause.hint}</p>}
      <pre class="fig-cause-lines" data-testid="cause-lines">{cause.lines.join("\n")}</pre>
    </div>
  );
}

/** A boot the daemon holds: each node's phases on one time axis (boot start to its end, or to `now` while it runs), their figures, a failure's root cause. */
export function BootTimeline(p: { boot: BootView; now: number }) {
  const { boot } = p;
  // The page replaces a boot's events with a new array when one arrives; the length guards a caller that appends in place.
  const facts = useMemo(() => readBootEvents(boot), [boot.events, boot.events.length, boot.started_at]);
  const shape = layoutBoot(facts, p.now);
  const phases = [...new Set(shape.nodes.flatMap((n) => n.segments.map((s) => s.phase)))];
  return (
    <section class="fig-boot" data-testid="boot" data-deployment={boot.deployment} data-state={boot.state}>
      <p class="fig-caption">
        {boot.deployment} on {boot.cluster}
        {boot.lane === undefined ? "" : ` (lane ${boot.lane})`}: {boot.state}, {duration((shape.end - shape.start) / 1000)}
        {shape.running ? " so far" : ""}
      </p>
      {shape.nodes.length === 0 ? <p class="fig-empty">no node has reported a phase yet</p> : <Axis shape={shape} />}
      {shape.nodes.map((n) => (
        <NodeRow n={n} key={n.node} />
      ))}
      {shape.droppedNodes > 0 ? <p class="fig-note">{shape.droppedNodes} more nodes not drawn</p> : null}
      <PhaseLegend phases={phases} />
      {shape.cause === undefined ? null : <Cause cause={shape.cause} />}
    </section>
  );
}
