import type { PageState } from "../state.js";
import { bootNamed, deploymentNamed } from "../state.js";
import { BootTimeline } from "../figures.js";
import { ActionButton, Empty, Link, Section, useNow } from "../ui.js";

/** A boot the daemon holds, drawn live: its phases per node on one time line, its figures, a failure's root cause. */
export function BootPage(p: { state: PageState; name: string; cluster?: string }) {
  const now = useNow();
  const boot = bootNamed(p.state, p.name, p.cluster);
  const on = boot === undefined ? {} : { cluster: boot.cluster };
  const serving = deploymentNamed(p.state, p.name, boot?.cluster) !== undefined;
  const links = (
    <span class="row-actions">
      <Link to={{ view: "logs", name: p.name, ...on }}>logs</Link>
      {serving ? <Link to={{ view: "deployment", name: p.name, ...on }}>deployment</Link> : null}
      {boot?.state === "booting" ? <ActionButton action={{ kind: "cancel", deployment: p.name }} target={p.name} /> : null}
    </span>
  );
  return (
    <Section title={`Boot of ${p.name}`} aside={links}>
      {boot === undefined ? (
        <Empty>{p.state.loaded.has("boots") ? "The daemon holds no boot of this name (it ran elsewhere, or the daemon restarted since): see History." : "Reading…"}</Empty>
      ) : (
        <BootTimeline boot={boot} now={now} />
      )}
    </Section>
  );
}
