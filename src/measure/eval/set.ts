import * as z from "zod";
import { error, type Diagnostic, type Loc } from "../../config/diagnostic.js";
import { nearest } from "../../config/suggest.js";
import { GRADERS, type Grader } from "../../contract/evidence.js";
import { badPattern, CHOICE_LETTER } from "./grade.js";
import { columnOf, messagesOf, PROMPT_FIELDS, readLine, type ChatMessage, type IssueText } from "../jsonl.js";

export type { ChatMessage };

/**
 * An eval set (`launcher eval --set FILE`): JSON Lines, one question per line, e.g.
 *   {"id": "add-1", "prompt": "What is 2 + 3?", "expected": "5", "grader": "exact"}
 *   {"messages": [{"role": "system", "content": "..."}, {"role": "user", "content": "..."}], "expected": "B", "grader": "choice"}
 * Blank lines are skipped. Every bad line is reported together, as `FILE:LINE:COL: error: ...`
 * (compiler style, like `launcher validate`), and none is sent before the whole file is good.
 */

const ITEM_KEYS = ["id", "prompt", "messages", "expected", "grader"] as const;

const ItemSchema = z.strictObject({
  id: z.union([z.string().min(1), z.number()]).optional(),
  ...PROMPT_FIELDS,
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

/** eval's own field said better than zod says it: an unknown grader, with the nearest one. */
function graderIssue(issue: z.core.$ZodIssue, raw: Record<string, unknown>): IssueText | undefined {
  if (issue.code !== "invalid_value" || issue.path[0] !== "grader") return undefined;
  const near = typeof raw.grader === "string" ? nearest(raw.grader, GRADERS) : undefined;
  return { key: "grader", message: `unknown grader ${JSON.stringify(raw.grader)}`, hint: near === undefined ? `graders: ${GRADERS.join(", ")}` : `did you mean "${near}"? (graders: ${GRADERS.join(", ")})` };
}

const EXAMPLE = '{"prompt": "...", "expected": "...", "grader": "exact"}';

/** One line's item, or why not. `seen`: ids of earlier lines, for duplicates. */
function parseLine(file: string, line: number, text: string, seen: Map<string, number>): { item?: EvalItem; diagnostics: Diagnostic[] } {
  const at = (col: number): Loc => ({ file, line, col });
  const read = readLine(file, line, text, ItemSchema, { keys: ITEM_KEYS, example: EXAMPLE, special: graderIssue });
  const v = read.value;
  if (v === undefined) return { diagnostics: read.diagnostics };
  const diagnostics: Diagnostic[] = [];
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
  const messages = messagesOf(v);
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
