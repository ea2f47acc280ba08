/** The sum of a gauge's series in Prometheus text (`name{labels} value`); undefined when it is not there. */
export function sumGauge(text: string, metric: string): number | undefined {
  let total: number | undefined;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line.startsWith(metric)) continue;
    const m = /^(?:\{[^}]*\})? ([\d.eE+-]+)$/.exec(line.slice(metric.length));
    if (m) total = (total ?? 0) + Number(m[1]);
  }
  return total;
}
