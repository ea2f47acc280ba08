import { parseTOML, getStaticTOMLValue, ParseError, type AST } from "toml-eslint-parser";
import { error, type Diagnostic, type Loc } from "./diagnostic.js";

export type TomlPath = readonly (string | number)[];

/** A parsed TOML file that remembers where every key and value was written. */
export interface TomlDocument {
  readonly file: string;
  readonly value: Record<string, unknown>;
  /** Where the value at `path` starts; falls back to the nearest written ancestor. */
  locate(path: TomlPath): Loc;
  /** Where the key at `path` was written (its name, not its value). */
  locateKey(path: TomlPath): Loc;
  /** The table header (`[env]`, `[[extra_mounts]]`) a top-level path was written under, if any. */
  tableOf(path: TomlPath): { header: string; loc: Loc } | undefined;
}

export type TomlParse = { ok: true; doc: TomlDocument } | { ok: false; diagnostics: Diagnostic[] };

const pathKey = (path: TomlPath): string => JSON.stringify(path);

export function parseTomlDocument(file: string, text: string): TomlParse {
  let ast: AST.TOMLProgram;
  try {
    ast = parseTOML(text);
  } catch (e) {
    if (e instanceof ParseError) {
      return {
        ok: false,
        diagnostics: [error({ file, line: e.lineNumber, col: e.column + 1 }, `TOML syntax: ${e.message}`)],
      };
    }
    // toml-eslint-parser builds each string with String.fromCodePoint(...chars): a string of
    // more than about 100 000 characters overflows the stack. Name the longest line instead.
    if (e instanceof RangeError) {
      const lines = text.split("\n");
      const longest = lines.reduce((best, l, i) => (l.length > (lines[best]?.length ?? 0) ? i : best), 0);
      return {
        ok: false,
        diagnostics: [error({ file, line: longest + 1, col: 1 }, `a value on this line is too long to read (${lines[longest]?.length ?? 0} characters)`, "keep each string under 100 000 characters; a long value can go in a file in a mounted folder")],
      };
    }
    throw e;
  }
  const values = new Map<string, Loc>();
  const keys = new Map<string, Loc>();
  const tables = new Map<string, { header: string; loc: Loc }>();
  const at = (node: AST.HasLocs): Loc => ({ file, line: node.loc.start.line, col: node.loc.start.column + 1 });
  const arrayCounts = new Map<string, number>();

  const visitValue = (node: AST.TOMLContentNode, path: TomlPath): void => {
    values.set(pathKey(path), at(node));
    if (node.type === "TOMLArray") {
      node.elements.forEach((el, i) => visitValue(el, [...path, i]));
    } else if (node.type === "TOMLInlineTable") {
      for (const kv of node.body) visitKeyValue(kv, path);
    }
  };
  const visitKeyValue = (kv: AST.TOMLKeyValue, base: TomlPath): void => {
    const names = kv.key.keys.map((k) => (k.type === "TOMLBare" ? k.name : k.value));
    const path = [...base, ...names];
    keys.set(pathKey(path), at(kv.key));
    visitValue(kv.value, path);
  };

  const top = ast.body[0];
  for (const item of top.body) {
    if (item.type === "TOMLKeyValue") {
      visitKeyValue(item, []);
      continue;
    }
    const names = item.key.keys.map((k) => (k.type === "TOMLBare" ? k.name : k.value));
    let base: (string | number)[] = names;
    if (item.kind === "array") {
      const k = pathKey(names);
      const index = arrayCounts.get(k) ?? 0;
      arrayCounts.set(k, index + 1);
      base = [...names, index];
    }
    keys.set(pathKey(base), at(item));
    values.set(pathKey(base), at(item));
    const header = item.kind === "array" ? `[[${names.join(".")}]]` : `[${names.join(".")}]`;
    for (const kv of item.body) {
      const firstKey = kv.key.keys[0];
      const name = firstKey === undefined ? "" : firstKey.type === "TOMLBare" ? firstKey.name : firstKey.value;
      tables.set(pathKey([...base, name]), { header, loc: at(item) });
      visitKeyValue(kv, base);
    }
  }

  const lookup = (map: Map<string, Loc>, path: TomlPath): Loc => {
    for (let n = path.length; n > 0; n--) {
      const hit = map.get(pathKey(path.slice(0, n))) ?? values.get(pathKey(path.slice(0, n)));
      if (hit) return hit;
    }
    return { file, line: 1, col: 1 };
  };

  const doc: TomlDocument = {
    file,
    value: getStaticTOMLValue(ast) as Record<string, unknown>,
    locate: (path) => lookup(values, path),
    locateKey: (path) => lookup(keys, path),
    tableOf: (path) => tables.get(pathKey(path)),
  };
  return { ok: true, doc };
}
