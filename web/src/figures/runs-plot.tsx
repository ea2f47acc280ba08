import { useMemo } from "preact/hooks";
import type { RunsAnswer } from "../../../src/contract/read-api.js";
import { RUN_PANELS, shapeRuns, type BenchSeriesShape, type RunsShape } from "./shape.js";

// A panel's drawing box (SVG user units; the figure scales it to its width in CSS).
const W = 300;
const H = 170;
const M = { left: 44, right: 8, top: 8, bottom: 28 };
const PLOT_W = W - M.left - M.right;
const PLOT_H = H - M.top - M.bottom;
const SERIES_CLASSES = 8;

const num = (v: number): string => (v >= 100 ? Math.round(v).toString() : v >= 10 ? v.toFixed(1) : v.toFixed(2));
const seriesClass = (i: number): string => `fig-series-${i % SERIES_CLASSES}`;

function Panel(p: { shape: RunsShape; panel: (typeof RUN_PANELS)[number] }) {
  const { shape, panel } = p;
  const top = shape.yMax[panel.key] > 0 ? shape.yMax[panel.key] * 1.1 : 1;
  const x = (f: number): number => M.left + f * PLOT_W;
  const y = (v: number): number => M.top + PLOT_H - (v / top) * PLOT_H;
  const band = (c: number): number => x((shape.concurrencies.indexOf(c) + 0.5) / Math.max(1, shape.concurrencies.length));
  return (
    <figure class="fig-runs-panel" data-metric={panel.key}>
      <figcaption>
        {panel.title} <span class="fig-unit">({panel.unit}, {panel.higherIsBetter ? "higher" : "lower"} is better)</span>
      </figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} class="fig-svg" role="img" aria-label={`${panel.title} by concurrency`}>
        <line class="fig-axis-line" x1={M.left} y1={M.top + PLOT_H} x2={W - M.right} y2={M.top + PLOT_H} />
        <line class="fig-axis-line" x1={M.left} y1={M.top} x2={M.left} y2={M.top + PLOT_H} />
        {[0, 0.5, 1].map((f) => (
          <text key={f} class="fig-svg-label" x={M.left - 4} y={y(top * f) + 3} text-anchor="end">{num(top * f)}</text>
        ))}
        {shape.concurrencies.map((c) => (
          <text key={c} class="fig-svg-label" x={band(c)} y={H - 10} text-anchor="middle">{c}</text>
        ))}
        <text class="fig-svg-label" x={M.left + PLOT_W / 2} y={H - 1} text-anchor="middle">concurrency</text>
        {shape.series.map((s, i) => (
          <SeriesMarks key={s.series} s={s} i={i} panel={panel.key} band={band} y={y} />
        ))}
      </svg>
    </figure>
  );
}

/** A series in a panel: its means joined, each run's value a dot, the runs' range a bar. Series side by side, a little apart. */
function SeriesMarks(p: { s: BenchSeriesShape; i: number; panel: (typeof RUN_PANELS)[number]["key"]; band: (c: number) => number; y: (v: number) => number }) {
  const points = p.s.points[p.panel];
  const dx = (p.i % 4) * 4 - 6;
  const at = (c: number): number => p.band(c) + dx;
  return (
    <g class={seriesClass(p.i)}>
      <polyline class="fig-series-line" points={points.map((pt) => `${at(pt.concurrency)},${p.y(pt.mean)}`).join(" ")} />
      {points.map((pt) => (
        <g key={pt.concurrency}>
          <line class="fig-series-range" x1={at(pt.concurrency)} x2={at(pt.concurrency)} y1={p.y(pt.min)} y2={p.y(pt.max)} />
          {pt.values.map((v, k) => (
            <circle key={k} class="fig-series-dot" cx={at(pt.concurrency)} cy={p.y(v)} r={2} />
          ))}
          <circle class="fig-series-mean" cx={at(pt.concurrency)} cy={p.y(pt.mean)} r={3.5}>
            <title>{`${p.s.subject}, ${pt.concurrency} concurrent: ${num(pt.mean)} mean of ${pt.values.length} runs (${num(pt.min)}–${num(pt.max)})`}</title>
          </circle>
        </g>
      ))}
    </g>
  );
}

function Evals(p: { shape: RunsShape }) {
  if (p.shape.evals.length === 0) return null;
  return (
    <ol class="fig-evals">
      {p.shape.evals.map((e) => (
        <li key={e.id} class="fig-eval" title={`${e.set} (${e.setHash.slice(0, 12)})`}>
          <span class="fig-eval-name">{e.subject}</span>
          <div class="fig-track">
            <div class="fig-seg fig-eval-correct" style={{ left: "0%", width: `${e.total > 0 ? ((e.correct / e.total) * 100).toFixed(2) : 0}%` }} />
          </div>
          <span class="fig-eval-score">
            {e.correct}/{e.total}
          </span>
        </li>
      ))}
    </ol>
  );
}

/** Stored bench series (throughput and latency by concurrency, across their runs) and evals (correct/total), with a line per subject against the first. */
export function RunsPlot(p: { runs: RunsAnswer }) {
  const shape = useMemo(() => shapeRuns(p.runs), [p.runs]);
  const empty = shape.series.length === 0 && shape.evals.length === 0;
  return (
    <figure class="fig-runs" data-testid="runs-plot" data-runs={shape.drawn}>
      {empty ? <p class="fig-empty">no stored runs yet: launcher bench and launcher eval store them</p> : null}
      {shape.summary.length === 0 ? null : (
        <>
          <ul class="fig-runs-summary">
            {shape.summary.map((line) => (
              <li key={line}>{line}</li>
            ))}
          </ul>
          {shape.summary.length > 1 ? (
            <p class="fig-note">
              Each subject's newest series and eval against the first's: differences of means, not verdicts (<code>launcher compare</code> says which exceed the noise).
            </p>
          ) : null}
        </>
      )}
      {shape.series.length === 0 ? null : (
        <>
          <ul class="fig-legend">
            {shape.series.map((s, i) => (
              <li key={s.series} class={seriesClass(i)}>
                <span class="fig-swatch" />
                {s.subject} · {s.started_at.slice(0, 16).replace("T", " ")} · {s.runs} run{s.runs === 1 ? "" : "s"}
                {s.failed > 0 ? ` · ${s.failed} requests failed` : ""}
              </li>
            ))}
          </ul>
          <div class="fig-runs-panels">
            {RUN_PANELS.map((panel) => (
              <Panel key={panel.key} shape={shape} panel={panel} />
            ))}
          </div>
        </>
      )}
      <Evals shape={shape} />
    </figure>
  );
}
