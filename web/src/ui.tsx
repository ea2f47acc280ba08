import { createContext, type ComponentChildren } from "preact";
import { useContext, useEffect, useState } from "preact/hooks";
import type { Action } from "./actions.js";
import { ACTION_VERBS } from "./actions.js";
import { ago, agoIso } from "./format.js";
import type { ActionKind } from "./gate.js";
import { routeHref, type Route } from "./route.js";

/** What the signed-in session may do, and how an action is asked for: a read session's set is empty. */
export interface Acting {
  readonly allowed: ReadonlySet<ActionKind>;
  readonly ask: (a: Action) => void;
}
export const ActingContext = createContext<Acting>({ allowed: new Set(), ask: () => undefined });

/** An action's button; nothing at all where the session may not take it. */
export function ActionButton(p: { action: Action; target?: string; label?: string }) {
  const acting = useContext(ActingContext);
  if (!acting.allowed.has(p.action.kind)) return null;
  return (
    <button type="button" class={`action action-${p.action.kind}`} data-action={p.action.kind} data-target={p.target} onClick={() => acting.ask(p.action)}>
      {p.label ?? ACTION_VERBS[p.action.kind]}
    </button>
  );
}

/** The clock, moved every `everyMs` while the component is shown (relative times, a boot's time line). */
export function useNow(everyMs = 1000): number {
  const [now, setNow] = useState(Date.now);
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(timer);
  }, [everyMs]);
  return now;
}

/** A time as `3 min ago`, its full time in the tooltip. */
export function Ago(p: { at: string | number; now: number }) {
  const ms = typeof p.at === "number" ? p.at : Date.parse(p.at);
  return <time dateTime={Number.isFinite(ms) ? new Date(ms).toISOString() : undefined} title={Number.isFinite(ms) ? new Date(ms).toLocaleString() : undefined}>{typeof p.at === "number" ? ago(p.at, p.now) : agoIso(p.at, p.now)}</time>;
}

export function Link(p: { to: Route; children: ComponentChildren; testid?: string }) {
  return <a href={routeHref(p.to)} data-testid={p.testid}>{p.children}</a>;
}

export function Section(p: { title: string; children: ComponentChildren; aside?: ComponentChildren }) {
  return (
    <section class="card">
      <header class="card-head">
        <h2>{p.title}</h2>
        {p.aside}
      </header>
      {p.children}
    </section>
  );
}

export const Empty = (p: { children: ComponentChildren }) => <p class="empty">{p.children}</p>;
