import { useMemo } from "preact/hooks";
import type { HistoryBoot } from "../../../src/contract/read-api.js";
import { duration } from "../format.js";
import { PhaseLegend, pct } from "./parts.js";
import { LIMITS, phaseClass, shapeHistory } from "./shape.js";

/** `2026-12-05 04:31`: a boot's start, to the minute (UTC, as the store keeps it). */
const when = (iso: string): string => iso.slice(0, 16).replace("T", " ");

const boots = (n: number): string => (n === 0 ? "no boots yet" : n === 1 ? "its one boot" : `its last ${n} boots, newest first (at most ${LIMITS.historyBars})`);

/** A recipe's past boots, newest first: one bar per boot, its head node's phases stacked on one shared axis. */
export function HistoryBars(p: { recipe: string; boots: readonly HistoryBoot[] }) {
  const shape = useMemo(() => shapeHistory(p.recipe, p.boots), [p.recipe, p.boots, p.boots.length]);
  return (
    <figure class="fig-history" data-testid="history-bars" data-recipe={p.recipe} data-boots={shape.bars.length}>
      <figcaption>
        {p.recipe}: {boots(shape.bars.length)}. Each bar is the head node's phases (its first node, rank 0, whose API serves), as <code>launcher history</code> lists
        them, end to end; the rest of a bar is the boot's time outside them (preflight, the wait for /health). The axis spans {duration(shape.scaleSeconds)}.
      </figcaption>
      <ol class="fig-bars">
        {shape.bars.map((b) => (
          <li class={`fig-bar fig-outcome-${b.outcome}`} data-outcome={b.outcome} key={b.id} title={b.error}>
            <span class="fig-bar-when">{when(b.started_at)}</span>
            <div class="fig-track">
              {b.segments.map((s, i) => (
                <div key={i} class={`fig-seg ${phaseClass(s.phase)}`} style={{ left: pct(s.left), width: pct(s.width) }} title={`${s.phase}: ${duration(s.seconds)}`} />
              ))}
            </div>
            <span class="fig-bar-total">
              {b.outcome} {duration(b.seconds)}
            </span>
          </li>
        ))}
      </ol>
      <PhaseLegend phases={shape.phases} />
    </figure>
  );
}
