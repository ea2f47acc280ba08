/** Route -> the HTTP methods it takes. A `{name}` segment stands for any one non-empty segment. */
export type MethodTable = Readonly<Record<string, readonly string[]>>;

/** What the gateway itself answers (HEAD as GET: Node sends the headers without the body). */
export const GATEWAY_METHODS: MethodTable = {
  "/health": ["GET", "HEAD"],
  "/metrics": ["GET", "HEAD"],
  "/v1/models": ["GET", "HEAD"],
  "/v1/models/{model}": ["GET", "HEAD"],
};

/** The `{name}` segments' values when the path's segments fit the pattern's (undecoded), else undefined. */
function segmentParams(pattern: readonly string[], path: readonly string[]): Record<string, string> | undefined {
  if (pattern.length !== path.length) return undefined;
  const params: Record<string, string> = {};
  for (const [i, seg] of pattern.entries()) {
    const value = path[i] ?? "";
    if (seg.startsWith("{") && seg.endsWith("}")) {
      if (value === "") return undefined;
      params[seg.slice(1, -1)] = value;
    } else if (seg !== value) return undefined;
  }
  return params;
}

/** The `{name}` segments' values when `path` fits `pattern` (undecoded), else undefined. */
export function routeParams(pattern: string, path: string): Record<string, string> | undefined {
  return segmentParams(pattern.split("/"), path.split("/"));
}

/**
 * The methods a path takes, the first table naming it winning; undefined when none does. The
 * patterns are split once here, not on every request the gateway answers.
 */
export function methodMatcher(tables: readonly MethodTable[]): (path: string) => readonly string[] | undefined {
  const routes = tables.flatMap((table) => Object.entries(table).map(([pattern, methods]) => ({ segments: pattern.split("/"), methods })));
  return (path) => {
    const segments = path.split("/");
    return routes.find((r) => segmentParams(r.segments, segments) !== undefined)?.methods;
  };
}

/** The methods `path` takes: the first table naming it wins; undefined when none does. */
export function allowedMethods(tables: readonly MethodTable[], path: string): readonly string[] | undefined {
  return methodMatcher(tables)(path);
}
