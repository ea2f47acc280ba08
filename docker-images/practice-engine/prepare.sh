#!/usr/bin/env bash
# Stage rootfs/ for the practice-engine image (a stand-in for vLLM, not vLLM):
#   rootfs/usr/local/bin/node  = a copy of this machine's `node` binary
#   rootfs/usr/local/bin/vllm  = ./vllm, the `vllm` command (`vllm serve`, `vllm --version`), run by node
#   rootfs/<lib path>          = every shared library `ldd` lists for it (same absolute paths)
#   rootfs/<dynamic loader>    = e.g. /lib64/ld-linux-x86-64.so.2
#   rootfs/tmp                 = empty, mode 1777
#   rootfs/app/parser.json     = launcher's table of vLLM's `vllm serve` parser (lib/parser.js reads
#                                it): src/engine/vllm/parser-table.json in launcher's source tree,
#                                dist/engine/vllm/parser-table.json in an installed launcher
# The image copies the host's node, so build it on a machine of the target
# architecture (x86_64 or aarch64). Safe to run repeatedly: rootfs/ is rebuilt.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$here/rootfs"

node_path="$(command -v node || true)"
if [[ -z "$node_path" ]]; then
  echo "prepare.sh: node not found on PATH" >&2
  exit 1
fi
node_bin="$(readlink -f "$node_path")"
if [[ "$(head -c 4 "$node_bin" | od -An -c | tr -d ' ')" != '177ELF' ]]; then
  echo "prepare.sh: $node_bin is not an ELF binary (a shim/wrapper?); point PATH at a real node" >&2
  exit 1
fi

# launcher's source tree has src/, an installed launcher (npm) dist/.
top="$(cd "$here/../.." && pwd)"
table=""
for candidate in "$top/src/engine/vllm/parser-table.json" "$top/dist/engine/vllm/parser-table.json"; do
  if [[ -f "$candidate" ]]; then table="$candidate"; break; fi
done
if [[ -z "$table" ]]; then
  echo "prepare.sh: no parser table: neither $top/src/engine/vllm/parser-table.json nor $top/dist/engine/vllm/parser-table.json exists (launcher's table of vLLM's parser, which the image serves by)" >&2
  exit 1
fi

ldd_out="$(ldd "$node_bin" 2>&1 || true)"
if grep -q 'not found' <<<"$ldd_out"; then
  echo "prepare.sh: ldd reports missing libraries for $node_bin:" >&2
  echo "$ldd_out" >&2
  exit 1
fi

case "$root" in
  */docker-images/practice-engine/rootfs) ;;
  *) echo "prepare.sh: refusing to recreate unexpected path $root" >&2; exit 1 ;;
esac
rm -rf "$root"
mkdir -p "$root/usr/local/bin" "$root/tmp" "$root/app"
chmod 1777 "$root/tmp"

cp -L "$node_bin" "$root/usr/local/bin/node"
chmod 0755 "$root/usr/local/bin/node"
cp "$here/vllm" "$root/usr/local/bin/vllm"
chmod 0755 "$root/usr/local/bin/vllm"
cp "$table" "$root/app/parser.json"
chmod 0644 "$root/app/parser.json"
# launcher's table of llama-server's options, which the llama.cpp persona (lib/llamacpp/) checks its flags by.
for candidate in "$top/src/engine/llamacpp/llama-server-options.json" "$top/dist/engine/llamacpp/llama-server-options.json"; do
  if [[ -f "$candidate" ]]; then cp "$candidate" "$root/app/llama-server-options.json"; chmod 0644 "$root/app/llama-server-options.json"; break; fi
done

copy_abs() {
  local src="$1"
  [[ -e "$src" ]] || return 0
  mkdir -p "$root$(dirname "$src")"
  cp -L "$src" "$root$src"
}

# Every absolute path ldd prints (libraries and the program interpreter).
while read -r lib; do
  copy_abs "$lib"
done < <(grep -o '/[^ )]*' <<<"$ldd_out" | sort -u)

# A POSIX shell and mkdir, as every real vLLM image has (launcher's Ray head runs a sh script that
# writes vLLM's config file before `ray start`), with their libraries.
for tool in sh mkdir; do
  tool_bin="$(readlink -f "$(command -v "$tool")")"
  cp -L "$tool_bin" "$root/usr/local/bin/$tool"
  while read -r lib; do
    copy_abs "$lib"
  done < <(ldd "$tool_bin" 2>/dev/null | grep -o '/[^ )]*' | sort -u)
done

# The dynamic loader, explicitly (ldd lists it, but be sure).
for ld in /lib64/ld-linux-x86-64.so.2 /lib/ld-linux-aarch64.so.1; do
  copy_abs "$ld"
done

echo "prepare.sh: staged $root ($(du -sh "$root" | cut -f1)) from $node_bin ($("$node_bin" --version))"
find "$root" -type f | sed "s|^$root||" | sort
