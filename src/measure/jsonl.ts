/**
 * One JSON Lines reader for the files that hold chat prompts: `launcher eval --set` and `launcher
 * bench --prompts`. Both take a line's request as `prompt` (one user message) or `messages` (a
 * chat), and both name a bad line's file, line, column and field (compiler style, like `launcher
 * validate`): a line's diagnostics are made here once, each command adds only its own fields.
 */
import * as z from "zod";
import { error, type Diagnostic, type Loc } from "../config/diagnostic.js";
import { nearest } from "../config/suggest.js";

/** A chat message as the OpenAI chat completions API takes it; content is text or content parts, passed on as given. */
export const MessageSchema = z.looseObject({
  role: z.string().min(1),
  content: z.union([z.string(), z.array(z.unknown())]),
});
export type ChatMessage = z.infer<typeof MessageSchema>;

/** The request fields of a line: exactly one of them (checked by promptProblem). */
export const PROMPT_FIELDS = {
  prompt: z.string().min(1).optional(),
  messages: z.array(MessageSchema).min(1).optional(),
};

/** The messages a line asks with. */
export function messagesOf(v: { readonly prompt?: string | undefined; readonly messages?: readonly ChatMessage[] | undefined }): ChatMessage[] {
  return v.messages === undefined ? [{ role: "user", content: v.prompt ?? "" }] : [...v.messages];
}

/** The column (1-based) where `key` is written on the line, else 1: a diagnostic points at the field. */
export function columnOf(text: string, key: string | undefined): number {
  if (key === undefined) return 1;
  const at = text.indexOf(`"${key}"`);
  return at < 0 ? 1 : at + 1;
}

/** V8's JSON.parse says "at position N" for most errors (0-based in the string); else the line start. */
function jsonErrorColumn(message: string): number {
  const m = /at position (\d+)/.exec(message);
  return m?.[1] === undefined ? 1 : Number(m[1]) + 1;
}

/** A schema issue said with its field; `special` may say it better for a command's own field. */
export type IssueText = { key: string | undefined; message: string; hint?: string };

function issueMessage(issue: z.core.$ZodIssue, raw: Record<string, unknown>, keys: readonly string[], special?: (issue: z.core.$ZodIssue, raw: Record<string, unknown>) => IssueText | undefined): IssueText {
  const own = special?.(issue, raw);
  if (own !== undefined) return own;
  const key = typeof issue.path[0] === "string" ? issue.path[0] : undefined;
  const where = issue.path.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("").replace(/^\./, "");
  if (issue.code === "unrecognized_keys") {
    const unknown = issue.keys[0] ?? "";
    const near = nearest(unknown, keys);
    return { key: unknown, message: `unknown field \`${unknown}\``, hint: near === undefined ? `the fields are ${keys.join(", ")}` : `did you mean \`${near}\`?` };
  }
  if (issue.code === "invalid_type" && raw[key ?? ""] === undefined) return { key, message: `\`${where}\` is missing` };
  return { key, message: `\`${where}\`: ${issue.message}` };
}

/** One line of the file, read against `schema`; its diagnostics name file, line, column and field. */
export function readLine<S extends z.ZodType>(
  file: string,
  line: number,
  text: string,
  schema: S,
  what: { readonly keys: readonly string[]; readonly example: string; readonly special?: (issue: z.core.$ZodIssue, raw: Record<string, unknown>) => IssueText | undefined },
): { value?: z.infer<S>; diagnostics: Diagnostic[] } {
  const at = (col: number): Loc => ({ file, line, col });
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    return { diagnostics: [error(at(jsonErrorColumn((e as Error).message)), `not JSON: ${(e as Error).message}`, `each line is one JSON object, e.g. ${what.example}`)] };
  }
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    return { diagnostics: [error(at(1), "not a JSON object", `each line is an object such as ${what.example}`)] };
  }
  const obj = raw as Record<string, unknown>;
  const parsed = schema.safeParse(obj);
  if (!parsed.success) {
    return {
      diagnostics: parsed.error.issues.map((issue) => {
        const m = issueMessage(issue, obj, what.keys, what.special);
        return error(at(columnOf(text, m.key)), m.message, m.hint);
      }),
    };
  }
  const v = parsed.data as { prompt?: unknown; messages?: unknown };
  if ((v.prompt === undefined) === (v.messages === undefined)) {
    return { diagnostics: [error(at(1), v.prompt === undefined ? "neither `prompt` nor `messages`" : "both `prompt` and `messages`", "give exactly one: `prompt` (one user message) or `messages` (a chat)")] };
  }
  return { value: parsed.data, diagnostics: [] };
}
