/**
 * Splits a string into words the way a POSIX shell would (quote removal, backslash escapes),
 * without expansion: recipes write JSON values inside single quotes and the engine must
 * receive them unquoted.
 */
export type ShellWords =
  | { ok: true; words: string[] }
  | { ok: false; message: string; offset: number };

export function splitShellWords(input: string): ShellWords {
  const words: string[] = [];
  let current = "";
  let inWord = false;
  let i = 0;
  while (i < input.length) {
    const c = input[i] as string;
    if (c === " " || c === "\t" || c === "\n" || c === "\r") {
      if (inWord) words.push(current);
      current = "";
      inWord = false;
      i++;
      continue;
    }
    inWord = true;
    if (c === "'") {
      const end = input.indexOf("'", i + 1);
      if (end < 0) return { ok: false, message: "unbalanced single quote", offset: i };
      current += input.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      let j = i + 1;
      let closed = false;
      while (j < input.length) {
        const d = input[j] as string;
        if (d === '"') {
          closed = true;
          break;
        }
        if (d === "\\" && j + 1 < input.length && '"\\$`\n'.includes(input[j + 1] as string)) {
          if (input[j + 1] !== "\n") current += input[j + 1];
          j += 2;
          continue;
        }
        current += d;
        j++;
      }
      if (!closed) return { ok: false, message: "unbalanced double quote", offset: i };
      i = j + 1;
    } else if (c === "\\") {
      if (i + 1 >= input.length) return { ok: false, message: "dangling backslash", offset: i };
      if (input[i + 1] !== "\n") current += input[i + 1];
      i += 2;
    } else {
      current += c;
      i++;
    }
  }
  if (inWord) words.push(current);
  return { ok: true, words };
}

const SAFE_WORD = /^[A-Za-z0-9_@%+=:,./-]+$/;

/**
 * The one function that quotes a value for a POSIX shell. Everything that reaches a remote
 * shell goes through it.
 */
export function shellQuote(word: string): string {
  if (word !== "" && SAFE_WORD.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

export function shellJoin(argv: readonly string[]): string {
  return argv.map(shellQuote).join(" ");
}

/**
 * The longest remote command a node takes. sshd runs the command as ONE argument of the user's
 * shell (openssh-portable session.c do_child: execve(shell, {shell0, "-c", command})), and Linux
 * refuses any single execve argument longer than MAX_ARG_STRLEN = 32 pages (include/uapi/linux/
 * binfmts.h), 128 KiB with 4 KiB pages, the NUL included: beyond it the node says E2BIG.
 */
export const MAX_REMOTE_COMMAND_BYTES = 32 * 4096 - 1;

/** The one string a remote shell receives for `argv`: what ssh sends and what the limit applies to. */
export function remoteCommand(argv: readonly string[]): string {
  return shellJoin(argv);
}

/** Bytes of `argv` as a remote command, to hold against MAX_REMOTE_COMMAND_BYTES. */
export function remoteCommandBytes(argv: readonly string[]): number {
  return Buffer.byteLength(remoteCommand(argv), "utf8");
}
