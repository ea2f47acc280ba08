import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { decodeReadEvent, READ_EVENTS, READ_PATHS, type SessionRole } from "../../src/contract/read-api.js";
import { act, read, recipes as readRecipes, session, SignedOut, signIn, signOut } from "./api.js";
import { actionQuestion, actionRequest, ACTION_VERBS, needsRecipe, type Action, type Outcome } from "./actions.js";
import { actionsFor } from "./gate.js";
import { NAV_VIEWS, navOf, parseRoute, routeHref, type Route } from "./route.js";
import { applyAnswer, applyEvent, EMPTY_STATE, PAGE_READS, rereadsAfter, type PageRead, type PageState } from "./state.js";
import { ActingContext, type Acting } from "./ui.js";
import { ActivityPage } from "./views/activity.js";
import { BootPage } from "./views/boot.js";
import { DeploymentPage } from "./views/deployment.js";
import { HistoryPage, RunsPage } from "./views/history.js";
import { LogsPage } from "./views/logs.js";
import { Overview } from "./views/overview.js";

type Auth = { readonly phase: "checking" } | { readonly phase: "signed-out"; readonly why: string } | { readonly phase: "signed-in"; readonly role: SessionRole; readonly csrf: string };

const SIGN_IN_WORDS: Readonly<Record<"refused" | "throttled" | "error", string>> = {
  refused: "That key was refused: use the admin key, or an inference key to only read.",
  throttled: "Too many wrong keys from this address: sign-in is refused for a minute.",
  error: "The daemon did not take the sign-in: try again.",
};

/** The page: a session first (a one-time code from `launcher dashboard`, else a key asked once), then the dashboard. */
export function App(p: { code: string | undefined }) {
  const [auth, setAuth] = useState<Auth>({ phase: "checking" });
  const signedOut = useCallback((why: string) => setAuth({ phase: "signed-out", why }), []);
  const enter = useCallback(async (why: string) => {
    const s = await session();
    setAuth(s === undefined ? { phase: "signed-out", why } : { phase: "signed-in", role: s.role, csrf: s.csrf_token });
  }, []);
  useEffect(() => {
    const start = async (): Promise<void> => {
      const byCode = p.code === undefined ? undefined : await signIn({ code: p.code });
      await enter(byCode === undefined ? "Sign in with a key." : byCode === "ok" ? "The link signed in, but no session followed: sign in with a key." : "That link was refused: it was used or has expired. Run launcher dashboard for a new one, or sign in with a key.");
    };
    start().catch((e: unknown) => signedOut(`The daemon does not answer (${(e as Error).message}): reload to try again.`));
  }, []);
  if (auth.phase === "checking") return <p class="checking">Signing in…</p>;
  if (auth.phase === "signed-out") return <SignIn why={auth.why} onSignedIn={() => enter("Signed in, but the session was not found: sign in again.")} />;
  return <Dashboard role={auth.role} csrf={auth.csrf} onSignedOut={signedOut} />;
}

function SignIn(p: { why: string; onSignedIn: () => Promise<void> }) {
  const [status, setStatus] = useState(p.why);
  const [busy, setBusy] = useState(false);
  const key = useRef<HTMLInputElement>(null);
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    const input = key.current;
    if (input === null || input.value === "") return;
    // The key leaves the page at once: sent once, never kept.
    const typed = input.value;
    input.value = "";
    setBusy(true);
    try {
      const r = await signIn({ key: typed });
      if (r === "ok") return await p.onSignedIn();
      setStatus(SIGN_IN_WORDS[r]);
    } catch (err) {
      setStatus(`The daemon does not answer: ${(err as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="sign-in">
      <h1>launcher</h1>
      <form id="sign-in" onSubmit={(e) => void submit(e)}>
        <label for="key">Key: the admin key, or an inference key to only read</label>
        <input id="key" name="key" type="password" autoComplete="off" required ref={key} />
        <button type="submit" disabled={busy}>Sign in</button>
      </form>
      <p data-testid="sign-in-status" class="status">{status}</p>
    </main>
  );
}

/** The hash route, kept as the address changes. */
function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const moved = (): void => setRoute(parseRoute(location.hash));
    addEventListener("hashchange", moved);
    return () => removeEventListener("hashchange", moved);
  }, []);
  return route;
}

/** The longest wait before the events stream is opened again after the daemon refused or closed it. */
const MAX_REOPEN_MS = 30_000;

/**
 * The daemon's state: every route read at each (re)connection of ONE EventSource on the events
 * stream, then each event applied; nothing polls. A 401/403 anywhere ends the session.
 */
function useDaemonState(onSignedOut: (why: string) => void): { state: PageState; live: boolean; problem: string | undefined } {
  const [state, setState] = useState(EMPTY_STATE);
  const [live, setLive] = useState(false);
  const [problem, setProblem] = useState<string | undefined>();
  useEffect(() => {
    let left = false;
    let source: EventSource | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let wait = 1000;
    const ended = (): void => onSignedOut("Your session ended: sign in again.");
    const readAll = (kinds: readonly PageRead[]): void => {
      for (const kind of kinds) {
        read(kind).then(
          (answer) => void (left || setState((s) => applyAnswer(s, kind, answer))),
          (e: unknown) => (e instanceof SignedOut ? ended() : setProblem((e as Error).message)),
        );
      }
    };
    const open = (): void => {
      source = new EventSource(READ_PATHS.events);
      // Read after the stream is open: what changes from here on arrives as events.
      source.onopen = () => {
        wait = 1000;
        setLive(true);
        setProblem(undefined);
        readAll(PAGE_READS);
      };
      for (const name of Object.keys(READ_EVENTS)) {
        source.addEventListener(name, (m: MessageEvent<string>) => {
          const e = decodeReadEvent(name, m.data);
          if (e === undefined) return;
          setState((s) => applyEvent(s, e));
          const again = rereadsAfter(e);
          if (again.length > 0) readAll(again);
        });
      }
      source.onerror = () => {
        setLive(false);
        // CONNECTING: the browser reconnects by itself (the daemon's retry); CLOSED: it was refused.
        if (source?.readyState !== EventSource.CLOSED) return;
        session().then(
          (s) => {
            if (s === undefined) return ended();
            if (left) return;
            timer = setTimeout(open, wait);
            wait = Math.min(wait * 2, MAX_REOPEN_MS);
          },
          () => {
            setProblem("the daemon does not answer: trying again");
            if (!left) timer = setTimeout(open, (wait = Math.min(wait * 2, MAX_REOPEN_MS)));
          },
        );
      };
    };
    open();
    return () => {
      left = true;
      clearTimeout(timer);
      source?.close();
    };
  }, []);
  return { state, live, problem };
}

function Dashboard(p: { role: SessionRole; csrf: string; onSignedOut: (why: string) => void }) {
  const route = useRoute();
  const { state, live, problem } = useDaemonState(p.onSignedOut);
  const [asking, setAsking] = useState<Action | undefined>();
  const [result, setResult] = useState<Outcome | undefined>();
  const acting: Acting = useMemo(() => ({ allowed: actionsFor(p.role), ask: setAsking }), [p.role]);
  const run = (a: Action): void => {
    setAsking(undefined);
    const req = actionRequest(a);
    if (req === undefined) return;
    setResult({ outcome: "pending", message: `${ACTION_VERBS[a.kind]}…` });
    act(a, req, p.csrf, setResult).catch((e: unknown) => setResult({ outcome: "error", message: `the daemon did not answer: ${(e as Error).message}` }));
  };
  const leave = async (): Promise<void> => {
    await signOut(p.csrf).catch(() => undefined);
    p.onSignedOut("Signed out.");
  };
  return (
    <ActingContext.Provider value={acting}>
      <header class="top">
        <h1>launcher</h1>
        <nav>
          {NAV_VIEWS.map((v) => (
            <a href={routeHref({ view: v })} data-view={v} class={navOf(route) === v ? "current" : ""} key={v}>{v}</a>
          ))}
        </nav>
        <span class={`live ${live ? "on" : "off"}`}>{live ? "live" : "reconnecting"}</span>
        <span class="role" data-testid="role" data-role={p.role}>{p.role === "admin" ? "admin" : "read-only"}</span>
        <button type="button" data-testid="sign-out" onClick={() => void leave()}>Sign out</button>
      </header>
      {problem === undefined ? null : <p class="problem banner">{problem}</p>}
      {result === undefined ? null : <ActionResult result={result} onClose={() => setResult(undefined)} />}
      <main>
        <View route={route} state={state} onSignedOut={() => p.onSignedOut("Your session ended: sign in again.")} />
      </main>
      {acting.allowed.size === 0 ? null : <Confirm action={asking} onNo={() => setAsking(undefined)} onYes={run} lanes={state.lanes.map((l) => l.name)} />}
    </ActingContext.Provider>
  );
}

/** The route's view; those that show relative times move their own clock (./ui.tsx useNow), so the logs never redraw for it. */
function View(p: { route: Route; state: PageState; onSignedOut: () => void }) {
  const r = p.route;
  switch (r.view) {
    case "overview":
      return <Overview state={p.state} />;
    case "deployment":
      return <DeploymentPage state={p.state} name={r.name} {...(r.cluster === undefined ? {} : { cluster: r.cluster })} />;
    case "boot":
      return <BootPage state={p.state} name={r.name} {...(r.cluster === undefined ? {} : { cluster: r.cluster })} />;
    case "logs":
      return <LogsPage state={p.state} name={r.name} {...(r.cluster === undefined ? {} : { cluster: r.cluster })} onSignedOut={p.onSignedOut} />;
    case "activity":
      return <ActivityPage state={p.state} />;
    case "history":
      return <HistoryPage state={p.state} />;
    case "runs":
      return <RunsPage state={p.state} />;
  }
}

function ActionResult(p: { result: Outcome; onClose: () => void }) {
  const r = p.result;
  return (
    <p class={`action-result ${r.outcome}`} data-testid="action-result" data-outcome={r.outcome === "pending" ? undefined : r.outcome} role="status">
      <span>{r.message}</span>
      {r.deployment === undefined ? null : <a href={routeHref({ view: "boot", name: r.deployment })}>watch the boot</a>}
      <button type="button" class="close" onClick={p.onClose} aria-label="dismiss">×</button>
    </p>
  );
}

/** The confirmation every action goes through: a modal <dialog>, with the recipe (and lane) where the action needs them. */
function Confirm(p: { action: Action | undefined; lanes: readonly string[]; onNo: () => void; onYes: (a: Action) => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [choices, setChoices] = useState<readonly { name: string; description?: string }[] | undefined>();
  const [problem, setProblem] = useState<string | undefined>();
  const [recipe, setRecipe] = useState("");
  const [lane, setLane] = useState("");
  const a = p.action;
  useEffect(() => {
    const el = dialog.current;
    if (el === null) return;
    if (a === undefined) return void (el.open && el.close());
    setRecipe("");
    setLane("");
    setProblem(undefined);
    if (!el.open) el.showModal();
    if (needsRecipe(a)) readRecipes().then((r) => setChoices(r), (e: unknown) => setProblem(`the recipes could not be read: ${(e as Error).message}`));
  }, [a]);
  const chosen: Action | undefined = a === undefined ? undefined : a.kind === "swap" ? { ...a, recipe } : a.kind === "start" ? { ...a, recipe, lane } : a;
  const ready = chosen !== undefined && actionRequest(chosen) !== undefined;
  return (
    <dialog data-testid="confirm" ref={dialog} onCancel={(e) => { e.preventDefault(); p.onNo(); }}>
      {a === undefined ? null : (
        <form method="dialog" onSubmit={(e) => { e.preventDefault(); if (chosen !== undefined && ready) p.onYes(chosen); }}>
          <p>{actionQuestion(a)}</p>
          {needsRecipe(a) ? (
            <label>
              recipe{" "}
              <select data-testid="recipe-choice" value={recipe} onChange={(e) => setRecipe((e.currentTarget as HTMLSelectElement).value)}>
                <option value="">{choices === undefined ? "reading the recipes…" : "choose a recipe"}</option>
                {(choices ?? []).map((c) => <option value={c.name} key={c.name}>{c.description === undefined ? c.name : `${c.name}: ${c.description}`}</option>)}
              </select>
            </label>
          ) : null}
          {a.kind === "start" ? (
            <label>
              lane (optional){" "}
              <input type="text" list="lane-names" maxLength={128} value={lane} onInput={(e) => setLane((e.currentTarget as HTMLInputElement).value)} />
              <datalist id="lane-names">{p.lanes.map((l) => <option value={l} key={l} />)}</datalist>
            </label>
          ) : null}
          {problem === undefined ? null : <p class="problem">{problem}</p>}
          <div class="buttons">
            <button type="button" data-testid="confirm-no" onClick={p.onNo}>Keep it</button>
            <button type="submit" data-testid="confirm-yes" disabled={!ready}>{ACTION_VERBS[a.kind]}</button>
          </div>
        </form>
      )}
    </dialog>
  );
}
