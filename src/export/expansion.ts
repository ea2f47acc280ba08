/*
 * Kubernetes expands `$(NAME)` in a container's command, args and env values with the container's
 * env (and the env LWS adds), and `$$` to `$`; `$` before anything else stays as it is
 * (kubernetes/kubernetes third_party/forked/golang/expansion/expand.go: Expand, tryReadVariableName;
 * docs: "Define a Command and Arguments for a Container", "$$(VAR_NAME) will produce the string
 * literal $(VAR_NAME)"). A reference to a name that is not defined is left as written.
 */

/** A word as launcher planned it, made to reach the container unchanged through that expansion. */
export function escapeExpansion(word: string): string {
  // Only a `$` that starts `$$` or `$(` is read specially: double exactly those.
  return word.replace(/\$(?=[$(])/g, "$$$$");
}

/** `$(NAME)`: a reference to an env variable, expanded by Kubernetes. */
export const reference = (name: string): string => `$(${name})`;

/** What Kubernetes makes of `word`, given the variables defined (tests read exports with it). */
export function expand(word: string, vars: Readonly<Record<string, string>>): string {
  let out = "";
  for (let i = 0; i < word.length; i++) {
    const c = word[i];
    if (c !== "$" || i + 1 >= word.length) {
      out += c;
      continue;
    }
    const next = word[i + 1];
    if (next === "$") {
      out += "$";
      i++;
    } else if (next === "(") {
      const end = word.indexOf(")", i + 2);
      if (end < 0) {
        // An unclosed `$(` is kept, and the scan goes on after it.
        out += "$(";
        i++;
        continue;
      }
      const name = word.slice(i + 2, end);
      out += Object.hasOwn(vars, name) ? vars[name] : `$(${name})`;
      i = end;
    } else out += c;
  }
  return out;
}
