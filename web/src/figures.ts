// The page's figures (web/src/figures/: uPlot charts and phase bars), one home to import them from.
export { BootTimeline } from "./figures/boot-timeline.js";
export { HistoryBars } from "./figures/history-bars.js";
export { MetricsChart } from "./figures/metrics-chart.js";
export { RunsPlot } from "./figures/runs-plot.js";
