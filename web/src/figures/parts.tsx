import { phaseClass } from "./shape.js";

/** A fraction as a CSS percentage (set through element.style: the page's CSP allows no style attribute in its HTML). */
export const pct = (f: number): string => `${(Math.min(1, Math.max(0, f)) * 100).toFixed(3)}%`;

/** One swatch per phase, in the phases' order: the same colour as every figure draws it. */
export function PhaseLegend(p: { phases: readonly string[] }) {
  if (p.phases.length === 0) return null;
  return (
    <ul class="fig-legend">
      {p.phases.map((ph) => (
        <li key={ph}>
          <span class={`fig-swatch ${phaseClass(ph)}`} />
          {ph}
        </li>
      ))}
    </ul>
  );
}
