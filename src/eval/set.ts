import { z } from "zod";
import { error, type Diagnostic, type Loc } from "../config/diagnostic.js";
import { nearest } from "../config/suggest.js";
import { GRADERS, type Grader } from "../evidence/records.js";
import { badPattern, CHOICE_LETTER } from "./grade.js";

/**
 * An eval set (`launcher eval --set FILE`): JSON Lines, one question per line, e.g.
 *   {"id": "add-1", "prompt": "What is 2 + 3?", "expected": "5", "grader": "exact"}
 *   {"messages": [{"role": "system", "content": "..."}, {"role": "user", "content": "..."}], "expected": "B", "grader": "choice"}
 * Blank lines are skipped. Every bad line is reported together, as `FILE:LINE:COL: error: ...`
 * (compiler style, like `launcher validate`), and none is sent before the whole file is good.
 */

/** A chat message as the OpenAI chat completions API takes it; content is text or content parts, passed on as given. */
const MessageSchema = z.looseObject({
  role: z.string().min(1),
  content: z.union([z.string(), z.array(z.unknown())]),
});
export type ChatMessage = z.infer<typeof MessageSchema>;

const ITEM_KEYS = ["id", "prompt", "messages", "expected", "grader"] as const;

const ItemSchema = z.strictObject({
  id: z.union([z.string().min(1), z.number()]).optional(),
  prompt: z.string().min(1).optional(),
  messages: z.array(MessageSchema).min(1).optional(),
  expected: z.string().min(1),
  grader: z.enum(GRADERS).optional(),
});

/** One question of a set, checked. */
export interface EvalItem {
  /** Its `id`, else `line N`: what the stored result and compare's pairing use. */
  readonly id: string;
  readonly line: number;
  readonly messages: readonly ChatMessage[];
  readonly expected: string;
  readonly grader: Grader;
}

/** Without a `grader` field an item is graded `exact`. */
export const DEFAULT_GRADER: Grader = "exact";

export type ParsedSet = { readonly items: readonly EvalItem[]; readonly diagnostics: readonly Diagnostic[] };

/** The column (1-based) where `key` is written on the line, else 1: a diagnostic points at the field. */
function columnOf(text: string, key: string | undefined): number {
  if (key === undefined) return 1;
  const at = text.indexOf(`"${key}"`);
  return at < 0 ? 1 : at + 1;
}

/** V8's JSON.parse says "at position N" for most errors (0-based in the string); else the line start. */
function jsonErrorColumn(message: string): number {
  const m = /at position (\d+)/.exec(message);
  return m?.[1] === undefined ? 1 : Number(m[1]) + 1;
}

function issueMessage(issue: z.core.$ZodIssue, raw: Record<string, unknown>): { key: string | undefined; message: string; hint?: string } {
  const key = typeof issue.path[0] === "string" ? issue.path[0] : undefined;
  const where = issue.path.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("").replace(/^\./, "");
  if (issue.code === "unrecognized_keys") {
    const unknown = issue.keys[0] ?? "";
    const near = nearest(unknown, ITEM_KEYS);
    return { key: unknown, message: `unknown field \`${unknown}\``, hint: near === undefined ? `the fields are ${ITEM_KEYS.join(", ")}` : `did you mean \`${near}\`?` };
  }
  if (issue.code === "invalid_value" && key === "grader") {
    const near = typeof raw.grader === "string" ? nearest(raw.grader, GRADERS) : undefined;
    return { key, message: `unknown grader ${JSON.stringify(raw.grader)}`, hint: near === undefined ? `graders: ${GRADERS.join(", ")}` : `did you mean "${near}"? (graders: ${GRADERS.join(", ")})` };
  }
  if (issue.code === "invalid_type" && raw[key ?? ""] === undefined) return { key, message: `\`${where}\` is missing` };
  return { key, message: `\`${where}\`: ${issue.message}` };
}

/** One line's item, or why not. `seen`: ids of earlier lines, for duplicates. */
function parseLine(file: string, line: number, text: string, seen: Map<string, number>): { item?: EvalItem; diagnostics: Diagnostic[] } {
  const at = (col: number): Loc => ({ file, line, col });
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    return { diagnostics: [error(at(jsonErrorColumn((e as Error).message)), `not JSON: ${(e as Error).message}`, "each line of an eval set is one JSON object")] };
  }
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    return { diagnostics: [error(at(1), "not a JSON object", 'each line is an object such as {"prompt": "...", "expected": "...", "grader": "exact"}')] };
  }
  const obj = raw as Record<string, unknown>;
  const parsed = ItemSchema.safeParse(obj);
  if (!parsed.success) {
    return {
      diagnostics: parsed.error.issues.map((issue) => {
        const m = issueMessage(issue, obj);
        return error(at(columnOf(text, m.key)), m.message, m.hint);
      }),
    };
  }
  const v = parsed.data;
  const diagnostics: Diagnostic[] = [];
  if ((v.prompt === undefined) === (v.messages === undefined)) {
    diagnostics.push(error(at(1), v.prompt === undefined ? "neither `prompt` nor `messages`" : "both `prompt` and `messages`", "give exactly one: `prompt` (one user message) or `messages` (a chat)"));
  }
  const grader = v.grader ?? DEFAULT_GRADER;
  if (grader === "regex") {
    const problem = badPattern(v.expected);
    if (problem !== undefined) diagnostics.push(error(at(columnOf(text, "expected")), `\`expected\` is not a valid regular expression: ${problem}`, "a regex grader's `expected` is a JavaScript regular expression the answer must match"));
  }
  if (grader === "choice" && !CHOICE_LETTER.test(v.expected)) {
    diagnostics.push(error(at(columnOf(text, "expected")), `\`expected\` is ${JSON.stringify(v.expected)}, not a choice letter`, 'a choice grader expects one letter, e.g. "B"'));
  }
  const id = v.id === undefined ? `line ${line}` : String(v.id);
  const first = seen.get(id);
  if (first !== undefined) diagnostics.push(error(at(columnOf(text, "id")), `id ${JSON.stringify(id)} is also the id of line ${first}`, "ids pair the items of two runs (compare): make each unique"));
  else seen.set(id, line);
  if (diagnostics.length > 0) return { diagnostics };
  const messages: ChatMessage[] = v.messages ?? [{ role: "user", content: v.prompt ?? "" }];
  return { item: { id, line, messages, expected: v.expected, grader }, diagnostics };
}

/** Parses a whole set; `file` names it in diagnostics. */
export function parseEvalSet(file: string, text: string): ParsedSet {
  const items: EvalItem[] = [];
  const diagnostics: Diagnostic[] = [];
  const seen = new Map<string, number>();
  // \r\n files too: a Windows-edited set is still a set.
  text.split(/\r?\n/).forEach((lineText, i) => {
    if (lineText.trim() === "") return;
    const r = parseLine(file, i + 1, lineText, seen);
    if (r.item !== undefined) items.push(r.item);
    diagnostics.push(...r.diagnostics);
  });
  if (items.length === 0 && diagnostics.length === 0) diagnostics.push(error({ file, line: 1, col: 1 }, "the set has no items", "one JSON object per line"));
  return { items, diagnostics };
}
