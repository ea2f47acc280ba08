// The sign-in page: a one-time code from `launcher dashboard` (?code=...), or a key typed once, is
// exchanged for an HttpOnly session cookie (src/daemon/web-session-api.ts); neither stays here.
const API = "/launcher/v1/";
const status = document.getElementById("status");
const form = document.getElementById("sign-in");
const keyInput = document.getElementById("key");
const signOut = document.getElementById("sign-out");

const ROLES = { admin: "admin: you read and act", read: "read-only (an inference key): you see, and start or stop nothing" };

async function signIn(body) {
  const res = await fetch(`${API}sign-in`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return res.status === 204;
}

async function showSession() {
  const res = await fetch(`${API}session`);
  if (!res.ok) return false;
  const session = await res.json();
  status.textContent = `Signed in as ${ROLES[session.role] ?? "?"}. The dashboard's views come in a later version.`;
  form.hidden = true;
  signOut.hidden = false;
  return true;
}

function askKey(why) {
  status.textContent = why;
  form.hidden = false;
  signOut.hidden = true;
}

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  const key = keyInput.value;
  keyInput.value = "";
  if ((await signIn({ key })) && (await showSession())) return;
  askKey("That key was refused (or too many tries: wait a minute).");
});

signOut.addEventListener("click", async () => {
  await fetch(`${API}sign-out`, { method: "POST" });
  askKey("Signed out.");
});

const code = new URLSearchParams(location.search).get("code");
// The code leaves the address bar (and the history) before anything else happens.
if (code !== null) history.replaceState(null, "", "/");
if (code !== null && (await signIn({ code })) && (await showSession())) {
  // Signed in by the link.
} else if (!(await showSession())) {
  askKey(code === null ? "Sign in with a key." : "That link was used or has expired: run `launcher dashboard` for a new one, or sign in with a key.");
}
