import type { Command } from "commander";
import { UserError } from "../config/errors.js";
import type { Output } from "../app/output.js";

/** What a shell needs to complete a command: its words, its options, what follows. */
export interface CompletionTree {
  readonly name: string;
  readonly description: string;
  readonly options: readonly { readonly short?: string; readonly long: string; readonly description: string; readonly takesValue: boolean }[];
  readonly commands: readonly CompletionTree[];
}

/** The program's commands and options as commander holds them: completion never lags behind the CLI. */
export function completionTree(command: Command): CompletionTree {
  return {
    name: command.name(),
    description: summary(command.description()),
    options: command.options
      .filter((o) => !o.hidden && o.long !== undefined)
      .map((o) => ({ ...(o.short === undefined ? {} : { short: o.short }), long: o.long as string, description: summary(o.description), takesValue: o.required || o.optional })),
    commands: command.commands.map(completionTree).flatMap((c, i) => [c, ...(command.commands[i]?.aliases() ?? []).map((alias) => ({ ...c, name: alias }))]),
  };
}

/** A description cut to what fits beside a completion. */
const summary = (text: string): string => {
  const first = text.split(/[;(]/)[0]?.trim() ?? "";
  return first.length > 70 ? `${first.slice(0, 67)}...` : first;
};

const optionWords = (t: CompletionTree): string[] => t.options.flatMap((o) => [o.long, ...(o.short === undefined ? [] : [o.short])]);

/** bash: the command is the first word that is no option; a command with subcommands offers them next. */
function bash(root: CompletionTree): string {
  const cases = root.commands.map((c) => {
    const subs = c.commands.map((s) => `      ${c.name}/${s.name}) words="${optionWords(s).join(" ")}" ;;`);
    return [`      ${c.name}) words="${optionWords(c).join(" ")}"; subs="${c.commands.map((s) => s.name).join(" ")}" ;;`, ...subs].join("\n");
  });
  const nested = root.commands.flatMap((c) => c.commands.map((s) => `${c.name}/${s.name}`)).join("|");
  return `# launcher completion for bash: source <(launcher completion bash)
_launcher() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" path="" words="" subs="" i w
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    case "$w" in -*) ;; *) if [[ -z $path ]]; then path="$w"; else case "$path/$w" in ${nested || "-/-"}) path="$path/$w" ;; esac; fi ;; esac
  done
  case "$path" in
      "") COMPREPLY=($(compgen -W "${root.commands.map((c) => c.name).join(" ")} ${optionWords(root).join(" ")}" -- "$cur")); return ;;
${cases.join("\n")}
  esac
  if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$words" -- "$cur"));
  elif [[ -n $subs && $path != */* ]]; then COMPREPLY=($(compgen -W "$subs" -- "$cur"));
  else COMPREPLY=($(compgen -f -- "$cur")); fi
}
complete -o default -F _launcher launcher
`;
}

/** zsh's _arguments specs: brackets and colons are its syntax, single quotes the script's. */
const zq = (text: string): string => text.replace(/'/g, "'\\''").replace(/\[/g, "(").replace(/]/g, ")").replace(/:/g, "\\:");

function zshArgs(t: CompletionTree): string {
  const specs = t.options.map((o) => {
    const value = o.takesValue ? `:${zq(o.long.slice(2))}:_files` : "";
    return o.short === undefined ? `'${o.long}[${zq(o.description)}]${value}'` : `'(${o.short} ${o.long})'{${o.short},${o.long}}'[${zq(o.description)}]${value}'`;
  });
  return [...specs, "'*:file:_files'"].join(" ");
}

function zsh(root: CompletionTree): string {
  const described = (ts: readonly CompletionTree[]): string => ts.map((c) => `'${zq(c.name)}:${zq(c.description)}'`).join(" ");
  const cases = root.commands.map((c) => {
    if (c.commands.length === 0) return `    ${c.name}) _arguments ${zshArgs(c)} ;;`;
    const subs = c.commands.map((s) => `        ${s.name}) shift words; (( CURRENT-- )); _arguments ${zshArgs(s)} ;;`).join("\n");
    return `    ${c.name})
      if (( CURRENT == 2 )); then local -a subs; subs=(${described(c.commands)}); _describe 'subcommand' subs; _arguments ${zshArgs(c)}; return; fi
      case $words[2] in
${subs}
        *) _arguments ${zshArgs(c)} ;;
      esac ;;`;
  });
  return `#compdef launcher
# launcher completion for zsh: launcher completion zsh > "\${fpath[1]}/_launcher", or source <(launcher completion zsh)
_launcher() {
  if (( CURRENT == 2 )); then
    local -a commands; commands=(${described(root.commands)})
    _describe 'command' commands; return
  fi
  shift words; (( CURRENT-- ))
  case $words[1] in
${cases.join("\n")}
  esac
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then _launcher "$@"; else compdef _launcher launcher; fi
`;
}

const fq = (text: string): string => `'${text.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;

function fish(root: CompletionTree): string {
  const lines = ["# launcher completion for fish: launcher completion fish > ~/.config/fish/completions/launcher.fish", "complete -c launcher -e"];
  const names = root.commands.map((c) => c.name).join(" ");
  for (const c of root.commands) lines.push(`complete -c launcher -n "not __fish_seen_subcommand_from ${names}" -f -a ${fq(c.name)} -d ${fq(c.description)}`);
  const option = (condition: string, o: CompletionTree["options"][number]): string =>
    `complete -c launcher -n ${fq(condition)}${o.short === undefined ? "" : ` -s ${o.short.slice(1)}`} -l ${o.long.slice(2)}${o.takesValue ? " -r" : ""} -d ${fq(o.description)}`;
  for (const c of root.commands) {
    for (const o of c.options) lines.push(option(`__fish_seen_subcommand_from ${c.name}`, o));
    const subNames = c.commands.map((s) => s.name).join(" ");
    for (const s of c.commands) {
      lines.push(`complete -c launcher -n ${fq(`__fish_seen_subcommand_from ${c.name}; and not __fish_seen_subcommand_from ${subNames}`)} -f -a ${fq(s.name)} -d ${fq(s.description)}`);
      for (const o of s.options) lines.push(option(`__fish_seen_subcommand_from ${c.name}; and __fish_seen_subcommand_from ${s.name}`, o));
    }
  }
  return `${lines.join("\n")}\n`;
}

const SHELLS: Record<string, (root: CompletionTree) => string> = { bash, zsh, fish };

export function completionScript(shell: string, root: CompletionTree): string {
  const write = SHELLS[shell];
  if (write === undefined) throw new UserError(`no completion for shell ${JSON.stringify(shell)}`, `launcher completion ${Object.keys(SHELLS).join("|")}`);
  return write(root);
}

export function registerCompletion(program: Command, io: Output): void {
  program
    .command("completion")
    .description("print the shell completion script (bash: source <(launcher completion bash); zsh and fish: see the script's first lines)")
    .argument("<shell>", Object.keys(SHELLS).join(", "))
    .action((shell: string) => io.out(completionScript(shell, completionTree(program)).trimEnd()));
}
