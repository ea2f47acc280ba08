import type { Grader } from "../../contract/evidence.js";

/** What a choice item's `expected` is: one letter (compared upper-case). */
export const CHOICE_LETTER = /^[A-Za-z]$/;

/** Why `pattern` is not a regular expression, or undefined when it is one. */
export function badPattern(pattern: string): string | undefined {
  try {
    new RegExp(pattern);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

/**
 * A reasoning trace left in the answer (an engine without a reasoning parser returns it in
 * `content`): what it mulls over is not the answer.
 */
const THINK_BLOCK = /<think>[\s\S]*?<\/think>/g;

/**
 * The markdown and LaTeX wrappers openai/simple-evals removes before it looks for the letter
 * (common.py normalize_response, used by mmlu_eval.py): `**B**`, `$\boxed{B}$`, `\text{B}`.
 */
function normalizeResponse(text: string): string {
  return text
    .replaceAll("**", "")
    .replaceAll("$\\boxed{", "")
    .replaceAll("}$", "")
    .replaceAll("\\$", "")
    .replaceAll("$\\text{", "")
    .replaceAll("$", "")
    .replaceAll("\\mathrm{", "")
    .replaceAll("\\{", "")
    .replaceAll("\\text", "")
    .replaceAll("\\(", "")
    .replaceAll("\\mathbf{", "")
    .replaceAll("{", "")
    .replaceAll("\\boxed", "");
}

/**
 * simple-evals' ANSWER_PATTERN_MULTICHOICE (common.py: `(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?`),
 * taken at its first match as gpqa_eval.py and mmlu_eval.py take it (re.search), with two
 * changes: any letter, not only A-D (sets with more options), and not followed by another letter,
 * so that "Answer: because ..." is not read as B.
 */
const ANSWER_LINE = /Answer[ \t]*:[ \t]*\$?([A-Za-z])(?![A-Za-z])/i;
/** An answer that is nothing but the letter: "B", "(B)", "B.", "B)". */
const LONE_LETTER = /^\(?([A-Za-z])[).]?$/;

/**
 * The choice letter an answer gives, upper-case, or undefined. The rule of openai/simple-evals
 * (its prompt asks for a last line `Answer: $LETTER`): the answer without a `<think>` block,
 * normalised as simple-evals normalises it, its first `Answer: X`; failing that, an answer that is
 * the letter alone.
 */
export function extractChoice(answer: string): string | undefined {
  const text = normalizeResponse(answer.replace(THINK_BLOCK, ""));
  const letter = ANSWER_LINE.exec(text)?.[1] ?? LONE_LETTER.exec(text.trim())?.[1];
  return letter?.toUpperCase();
}

/**
 * Graders, one rule each. exact: the answer, trimmed of surrounding whitespace (a model's trailing
 * newline), equals `expected`; contains: `expected` occurs in the answer; regex: the answer
 * matches `expected` as a JavaScript regular expression (anywhere; anchor it with ^...$ for the
 * whole answer); choice: the answer's choice letter (extractChoice) is `expected`'s.
 */
const GRADE: Record<Grader, (expected: string, answer: string) => boolean> = {
  exact: (expected, answer) => answer.trim() === expected.trim(),
  contains: (expected, answer) => answer.includes(expected),
  regex: (expected, answer) => new RegExp(expected).test(answer),
  choice: (expected, answer) => extractChoice(answer) === expected.toUpperCase(),
};

export function grade(grader: Grader, expected: string, answer: string): boolean {
  return GRADE[grader](expected, answer);
}
