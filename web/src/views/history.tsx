import { useMemo } from "preact/hooks";
import type { PageState } from "../state.js";
import { historyByRecipe } from "../state.js";
import { HistoryBars, RunsPlot } from "../figures.js";
import { Empty, Section } from "../ui.js";

/** Boot history: each recipe's boots as bars of their phase durations. */
export function HistoryPage(p: { state: PageState }) {
  const groups = useMemo(() => historyByRecipe(p.state.history), [p.state.history]);
  if (groups.length === 0) return <Section title="History"><Empty>{p.state.loaded.has("history") ? "No boot recorded yet." : "Reading…"}</Empty></Section>;
  return (
    <div class="history">
      {groups.map((g) => (
        <Section title={g.recipe} key={g.recipe}>
          <HistoryBars recipe={g.recipe} boots={g.boots} />
        </Section>
      ))}
    </div>
  );
}

/** Stored bench, eval and compare runs with their plot. */
export function RunsPage(p: { state: PageState }) {
  const runs = p.state.runs;
  return <Section title="Bench and eval runs">{runs === undefined ? <Empty>Reading…</Empty> : <RunsPlot runs={runs} />}</Section>;
}
