/** What a secret is shown as wherever launcher prints a value that holds it. */
export const REDACTED = "<redacted>";

/** `text` with every occurrence of each secret replaced, so that a key never reaches the screen. */
export function redactText(text: string, secrets: readonly string[]): string {
  return secrets.filter((s) => s !== "").reduce((t, s) => t.split(s).join(REDACTED), text);
}

/** A JSON-like value with the secrets redacted in every string, keys included. */
export function redactValue(value: unknown, secrets: readonly string[]): unknown {
  if (typeof value === "string") return redactText(value, secrets);
  if (Array.isArray(value)) return value.map((v) => redactValue(v, secrets));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [redactText(k, secrets), redactValue(v, secrets)]));
  }
  return value;
}
