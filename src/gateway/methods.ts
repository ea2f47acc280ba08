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

const matches = (pattern: string, path: string): boolean => {
  const p = pattern.split("/");
  const s = path.split("/");
  return p.length === s.length && p.every((seg, i) => (seg.startsWith("{") && seg.endsWith("}") ? (s[i] ?? "") !== "" : seg === s[i]));
};

/** The methods `path` takes: the first table naming it wins; undefined when none does. */
export function allowedMethods(tables: readonly MethodTable[], path: string): readonly string[] | undefined {
  for (const table of tables) {
    for (const [pattern, methods] of Object.entries(table)) if (matches(pattern, path)) return methods;
  }
  return undefined;
}
