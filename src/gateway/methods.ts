/** Route -> the HTTP methods it takes. A `{name}` segment stands for any one non-empty segment. */
export type MethodTable = Readonly<Record<string, readonly string[]>>;

/** What the gateway itself answers (HEAD as GET: Node sends the headers without the body). */
export const GATEWAY_METHODS: MethodTable = {
  "/health": ["GET", "HEAD"],
  "/metrics": ["GET", "HEAD"],
  "/v1/models": ["GET", "HEAD"],
  "/v1/models/{model}": ["GET", "HEAD"],
};

/** A /v1 path no table names is forwarded as before, for these methods only. */
export const UNKNOWN_V1_METHODS: readonly string[] = ["GET", "POST"];

/** The `{name}` segments' values when `path` fits `pattern` (undecoded), else undefined. */
export function routeParams(pattern: string, path: string): Record<string, string> | undefined {
  const p = pattern.split("/");
  const s = path.split("/");
  if (p.length !== s.length) return undefined;
  const params: Record<string, string> = {};
  for (const [i, seg] of p.entries()) {
    const value = s[i] ?? "";
    if (seg.startsWith("{") && seg.endsWith("}")) {
      if (value === "") return undefined;
      params[seg.slice(1, -1)] = value;
    } else if (seg !== value) return undefined;
  }
  return params;
}

const matches = (pattern: string, path: string): boolean => routeParams(pattern, path) !== undefined;

/** The methods `path` takes: the first table naming it wins; undefined when none does. */
export function allowedMethods(tables: readonly MethodTable[], path: string): readonly string[] | undefined {
  for (const table of tables) {
    for (const [pattern, methods] of Object.entries(table)) if (matches(pattern, path)) return methods;
  }
  return undefined;
}
