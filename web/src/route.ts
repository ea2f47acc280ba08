/**
 * The page's routes, in the address's hash (`#/deployments/NAME`, with `?cluster=C` where the name
 * runs on more than one cluster): the daemon serves one page, and
 * the hash never reaches it. Pure: parsed and written here, shown by the views.
 */

export const VIEWS = ["overview", "deployment", "boot", "logs", "activity", "history", "runs"] as const;
export type ViewName = (typeof VIEWS)[number];

export type Route =
  | { readonly view: "overview" | "activity" | "history" | "runs" }
  | { readonly view: "deployment" | "boot" | "logs"; readonly name: string; readonly cluster?: string };

/** The views a nav link names (`a[data-view=...]`), in the nav's order. */
export const NAV_VIEWS = ["overview", "activity", "history", "runs"] as const;

const PLAIN: Readonly<Record<string, Route>> = {
  "": { view: "overview" },
  activity: { view: "activity" },
  history: { view: "history" },
  runs: { view: "runs" },
};
const NAMED: Readonly<Record<string, "deployment" | "boot" | "logs">> = { deployments: "deployment", boots: "boot", logs: "logs" };

/** A name in a route is a deployment's: bounded, so the address cannot make the page hold a long one. */
const MAX_NAME = 256;

/** The route a hash names; anything it does not know is the overview. */
export function parseRoute(hash: string): Route {
  const [path = "", query] = hash.replace(/^#?\/?/, "").split("?", 2);
  const parts = path.split("/");
  const [head = "", name, ...rest] = parts;
  if (name === undefined) return Object.hasOwn(PLAIN, head) ? (PLAIN[head] as Route) : { view: "overview" };
  const view = Object.hasOwn(NAMED, head) ? NAMED[head] : undefined;
  if (view === undefined || rest.length > 0) return { view: "overview" };
  let decoded: string;
  try {
    decoded = decodeURIComponent(name);
  } catch {
    return { view: "overview" };
  }
  if (decoded === "" || decoded.length > MAX_NAME) return { view: "overview" };
  // URLSearchParams decodes and never throws; a cluster too long or empty is as if not named.
  const cluster = new URLSearchParams(query ?? "").get("cluster") ?? "";
  return cluster === "" || cluster.length > MAX_NAME ? { view, name: decoded } : { view, name: decoded, cluster };
}

const PREFIX: Readonly<Record<ViewName, string>> = { overview: "", deployment: "deployments", boot: "boots", logs: "logs", activity: "activity", history: "history", runs: "runs" };

/** The hash of a route (the inverse of parseRoute). */
export function routeHref(route: Route): string {
  if (!("name" in route)) return `#/${PREFIX[route.view]}`;
  const on = route.cluster === undefined ? "" : `?${new URLSearchParams({ cluster: route.cluster }).toString()}`;
  return `#/${PREFIX[route.view]}/${encodeURIComponent(route.name)}${on}`;
}

/** The nav link lit for a route: a deployment's own views sit under the overview. */
export function navOf(route: Route): (typeof NAV_VIEWS)[number] {
  return route.view === "activity" || route.view === "history" || route.view === "runs" ? route.view : "overview";
}
