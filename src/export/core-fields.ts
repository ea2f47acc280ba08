/*
 * kubernetes-models checks a core object against Kubernetes' OpenAPI schema, but that schema
 * leaves additionalProperties open: a container's `comand:` or a pod spec's `hostNetwok:`
 * validates, while kubectl's `--validate=strict` (the default; server-side field validation,
 * KEP-2885) refuses it. The package ships no JSON schema to make strict (its _schemas are ajv's
 * standalone code, generated from that OpenAPI schema: tommy351/kubernetes-models-ts), so the
 * fields a schema knows are read from its own validator: the generated code reads every property
 * its schema names (`void 0!==data.NAME`) and every key of a map it checks (`for (const k in
 * data)`), so a key of the object that it never read is one the schema does not name.
 */

/** A generated validator of kubernetes-models (`kubernetes-models/_schemas/*`). */
export type CoreValidate = (data: unknown) => boolean;

/**
 * Every field of `value` that `validate`'s schema does not name, as a JSON pointer ("/spec/hostNetwok").
 * Only meaningful once `value` validates: a validator that stops at its first error reads less.
 */
export function unknownFields(value: unknown, validate: CoreValidate): string[] {
  const seen = new Map<string, { target: object; keys: Set<string>; proxy: object }>();
  const wrap = (v: unknown, path: string): unknown => {
    if (v === null || typeof v !== "object") return v;
    const known = seen.get(path);
    if (known !== undefined && known.target === v) return known.proxy;
    const keys = new Set<string>();
    const proxy = new Proxy(v, {
      get(target, key, receiver) {
        const got: unknown = Reflect.get(target, key, receiver);
        if (typeof key !== "string") return got;
        keys.add(key);
        return Object.hasOwn(target, key) ? wrap(got, `${path}/${key.replaceAll("~", "~0").replaceAll("/", "~1")}`) : got;
      },
      has(target, key) {
        if (typeof key === "string") keys.add(key);
        return Reflect.has(target, key);
      },
    });
    seen.set(path, { target: v, keys, proxy });
    return proxy;
  };
  validate(wrap(value, ""));
  return [...seen.entries()].flatMap(([path, { target, keys }]) => (Array.isArray(target) ? [] : Object.keys(target).filter((k) => !keys.has(k)).map((k) => `${path}/${k}`)));
}
