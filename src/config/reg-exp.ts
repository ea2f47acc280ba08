/**
 * `text` as a regular expression that matches it literally. Node 24 has RegExp.escape, but the
 * package runs on Node 22 too (package.json engines), which has not: this is the escape MDN gives
 * for it ("Regular expressions", escaping), every syntax character behind a backslash.
 */
export const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");

/**
 * A fatal line's pattern made from its message: `^` when the line starts with it, the message
 * itself, then `rest` (a pattern, for the variable part), so that the two are never spelt twice.
 */
export const linePattern = (message: string, rest: string, anchored: boolean): RegExp => new RegExp(`${anchored ? "^" : ""}${escapeRegExp(message)}${rest}`);
