import { useEffect, useMemo, useRef } from "preact/hooks";
import uPlot from "uplot";
import type { ActivityRecord, MetricsPoint } from "../../../src/contract/read-api.js";
import { chartColumns, CHART_SPECS, type ChartMetric } from "./shape.js";

/** uPlot draws on a canvas at a size in pixels: the height is fixed, the width follows the figure's. */
const HEIGHT = 180;
const MIN_WIDTH = 160;
/** Line colours (a canvas takes no CSS class): the same order as figures.css' series colours. */
const COLOURS = ["#2f6fdf", "#d9822b", "#3a9a5b", "#b0417e"];

const widthOf = (el: HTMLElement): number => Math.max(MIN_WIDTH, Math.floor(el.clientWidth));

/**
 * The time axis' span. Samples at one instant span no time, and uPlot then widens a time scale by
 * 86400 / ms: with x in seconds (ms = 1e-3), a thousand days (uplot 1.6 dist/uPlot.esm.js
 * autoScaleX); a minute either side is shown instead.
 */
function xRange(u: uPlot, min: number, max: number): uPlot.Range.MinMax {
  const xs = u.data[0];
  const first = xs[0];
  return first !== undefined && first === xs[xs.length - 1] ? [first - 60, first + 60] : [min, max];
}

/** uPlot's options for a metric: a time axis (x in seconds since the epoch), the metric's series and unit. */
function chartOptions(metric: ChartMetric, width: number): uPlot.Options {
  const spec = CHART_SPECS[metric];
  const lines: uPlot.Series[] =
    metric === "ttft"
      ? // One point per request, never joined: requests are events, not a signal sampled.
        [{ label: "TTFT", stroke: COLOURS[0] as string, fill: COLOURS[0] as string, paths: () => null, points: { show: true, size: 5 } }]
      : spec.series.map((s, i) => ({ label: s.label, stroke: COLOURS[i % COLOURS.length] as string, width: 1.5, spanGaps: false }));
  return {
    width,
    height: HEIGHT,
    series: [{}, ...lines],
    scales: { x: { time: true, range: xRange }, y: metric === "kv_cache_usage" ? { range: [0, 100] } : { range: (_u, _min, max) => [0, max > 0 ? max : 1] } },
    axes: [{}, { label: spec.unit, size: 56 }],
    legend: { show: true },
    // No drag-to-zoom: the page gives new columns every second, and each would reset the zoom (setData rescales).
    cursor: { drag: { x: false, y: false, setScale: false } },
  };
}

/**
 * One engine metric over the last hour, drawn with uPlot: the chart is made once per mount (and
 * per metric) and given new columns as samples arrive, resized with its figure, destroyed on
 * unmount (uPlot's API: new uPlot(opts, data, target), setData, setSize, destroy; uplot 1.6
 * dist/uPlot.d.ts).
 */
export function MetricsChart(p: { metric: ChartMetric; points: readonly MetricsPoint[]; activity: readonly ActivityRecord[] }) {
  const { metric } = p;
  const spec = CHART_SPECS[metric];
  const shape = useMemo(() => chartColumns(metric, p.points, p.activity), [metric, p.points, p.points.length, p.activity, p.activity.length]);
  const host = useRef<HTMLDivElement>(null);
  const chart = useRef<uPlot | null>(null);

  // Another metric has other series: its chart is made anew (this cleanup runs before the effect below).
  useEffect(
    () => () => {
      chart.current?.destroy();
      chart.current = null;
    },
    [metric],
  );

  useEffect(() => {
    const el = host.current;
    if (el === null) return;
    if (shape.points === 0) {
      chart.current?.destroy();
      chart.current = null;
    } else if (chart.current === null) chart.current = new uPlot(chartOptions(metric, widthOf(el)), shape.columns, el);
    else chart.current.setData(shape.columns);
  }, [shape, metric]);

  useEffect(() => {
    const el = host.current;
    if (el === null || typeof ResizeObserver === "undefined") return;
    let width = widthOf(el);
    const observer = new ResizeObserver(() => {
      const w = widthOf(el);
      // Only a new width: uPlot's own drawing changes the host's height, which must not loop.
      if (w === width) return;
      width = w;
      chart.current?.setSize({ width: w, height: HEIGHT });
    });
    observer.observe(el);
    return () => observer.disconnect();
  }, []);

  return (
    <figure class="fig-chart" data-testid="chart" data-metric={metric} data-points={shape.points}>
      <figcaption>
        {spec.title} <span class="fig-unit">({spec.unit})</span>
      </figcaption>
      {shape.points === 0 ? <p class="fig-empty">no samples yet</p> : null}
      <div class="fig-chart-host" ref={host} />
    </figure>
  );
}
