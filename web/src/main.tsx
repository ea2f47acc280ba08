import "./zod-jitless.js";
import { render } from "preact";
import { App } from "./app.js";

// A one-time sign-in code from `launcher dashboard` (/?code=...) leaves the address bar and the
// history before anything else runs (History API replaceState: the entry is rewritten, not added),
// so that it is never bookmarked, shared or sent on. It is then exchanged for the session cookie.
const code = new URLSearchParams(location.search).get("code") ?? undefined;
if (code !== undefined) history.replaceState(null, "", `/${location.hash}`);

const root = document.getElementById("app");
if (root !== null) {
  root.textContent = "";
  render(<App code={code} />, root);
}
