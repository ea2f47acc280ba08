/**
 * `compare --plot FILE.svg`: throughput and latency against concurrency for both sides, each point
 * the mean over runs with a bar of ± one standard deviation (the spread the verdicts weigh).
 * Vega-Lite compiles the chart and Vega renders it to SVG headless (View with renderer "none" and
 * toSVG: no browser, no canvas; text widths are estimated without one).
 */
import { parse, View } from "vega";
import { compile, type TopLevelSpec } from "vega-lite";
import type { Comparison } from "./compare.js";

/** The panels, left to right: vLLM's keys, as compare.ts compares them. */
export const PLOTTED_METRICS = ["output_throughput", "mean_ttft_ms", "mean_e2el_ms"] as const;

interface Point {
  readonly side: string;
  readonly concurrency: number;
  readonly mean: number;
  readonly low: number;
  readonly high: number;
}

/** The chart as data: one panel per plotted metric that was compared, one series per side. */
export function plotSpec(c: Comparison): TopLevelSpec {
  const sideA = `A: ${c.a.label}`;
  const sideB = `B: ${c.b.label}`;
  const panels = PLOTTED_METRICS.flatMap((metric) => {
    const ms = c.bench.filter((m) => m.metric === metric);
    const first = ms[0];
    if (first === undefined) return [];
    const values: Point[] = ms.flatMap((m) =>
      ([[sideA, m.a], [sideB, m.b]] as const).map(([side, s]) => ({ side, concurrency: m.concurrency, mean: s.mean, low: s.mean - s.sd, high: s.mean + s.sd })),
    );
    const x = { field: "concurrency", type: "ordinal", title: "concurrency", axis: { labelAngle: 0 } } as const;
    const color = { field: "side", type: "nominal", title: null, scale: { domain: [sideA, sideB] } } as const;
    return [
      {
        title: first.label,
        width: 220,
        height: 180,
        data: { values },
        layer: [
          { mark: { type: "line", point: true }, encoding: { x, y: { field: "mean", type: "quantitative", title: first.label }, color } },
          { mark: { type: "rule" }, encoding: { x, y: { field: "low", type: "quantitative" }, y2: { field: "high" }, color } },
        ],
      },
    ];
  });
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: { text: `${sideA} vs ${sideB}`, subtitle: "mean over runs; bars: ± 1 standard deviation" },
    hconcat: panels,
    // A side is often a recipe's path: the legend shows it whole (Vega cuts labels at 160 px by default; 0 is no limit).
    config: { legend: { orient: "bottom", labelLimit: 0 } },
  } as TopLevelSpec;
}

/** The chart as SVG text. */
export async function plotSvg(c: Comparison): Promise<string> {
  const view = new View(parse(compile(plotSpec(c)).spec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
