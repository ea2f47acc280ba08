#!/usr/bin/env bash
# Build an image once on practice host n1 and copy it to every other practice
# host, so that all hosts hold the same image ID.
#
#   bash test/rig/build-image.sh IMAGE_TAG CONTEXT_DIR
#
# Runs CONTEXT_DIR/prepare.sh first if it exists (it stages rootfs/ etc.).
# Prints the image ID (sha256:...) on stdout; progress goes to stderr.
# Env: RIG_DIR, RIG_PREFIX (as for rig.sh), RIG_DOCKER (docker CLI).
set -euo pipefail

RIG_DIR=${RIG_DIR:-/tmp/launcher-rig}
RIG_DIR=${RIG_DIR%/}
RIG_PREFIX=${RIG_PREFIX:-lnch}
P=$RIG_PREFIX

log() { printf '[build-image] %s\n' "$*" >&2; }
die() { printf '[build-image] ERROR: %s\n' "$*" >&2; exit 1; }

(($# == 2)) || { echo "usage: $0 IMAGE_TAG CONTEXT_DIR" >&2; exit 2; }
TAG=$1
CTX=$(cd "$2" 2>/dev/null && pwd) || die "no context directory '$2'"
[[ -f $CTX/Dockerfile ]] || die "no Dockerfile in $CTX"

if [[ -n ${RIG_DOCKER:-} ]]; then DOCKER=$RIG_DOCKER
elif [[ -x /usr/bin/docker ]]; then DOCKER=/usr/bin/docker # Debian's, same version as dockerd
else DOCKER=$(command -v docker) || die "no docker CLI"; fi

# the same rule as rig.sh's sock_path: inside the host dir unless the path is too long
sock_of() {
	local s="$RIG_DIR/hosts/n$1/docker.sock"
	if ((${#s} > 100)); then s=/run/$P/n$1/docker.sock; fi
	echo "$s"
}

hosts=()
for d in "$RIG_DIR"/hosts/n*; do
	[[ -d $d ]] || continue
	i=${d##*/n}
	[[ $i =~ ^[0-9]+$ ]] && hosts+=("$i")
done
((${#hosts[@]})) || die "no practice hosts in $RIG_DIR (run: bash test/rig/rig.sh up)"
mapfile -t hosts < <(printf '%s\n' "${hosts[@]}" | sort -n)
[[ ${hosts[0]} == 1 ]] || die "host n1 missing in $RIG_DIR"
for i in "${hosts[@]}"; do
	timeout 10 "$DOCKER" -H "unix://$(sock_of "$i")" version >/dev/null 2>&1 ||
		die "dockerd of $P-n$i does not answer at $(sock_of "$i") (bash test/rig/rig.sh status)"
done

if [[ -f $CTX/prepare.sh ]]; then
	log "running $CTX/prepare.sh"
	t=$SECONDS
	(cd "$CTX" && bash ./prepare.sh) >&2 || die "prepare.sh failed"
	log "prepare.sh took $((SECONDS - t))s"
fi

N1=unix://$(sock_of 1)
t=$SECONDS
log "building $TAG on $P-n1"
# classic builder: dockerd 20.10 + Debian CLI, no buildx needed; --network none: no registry access
DOCKER_BUILDKIT=0 timeout 600 "$DOCKER" -H "$N1" build --network none -t "$TAG" "$CTX" >&2 || die "docker build failed"
ID=$("$DOCKER" -H "$N1" image inspect -f '{{.Id}}' "$TAG")
log "built $ID in $((SECONDS - t))s"

others=("${hosts[@]:1}")
if ((${#others[@]})); then
	t=$SECONDS
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/$P-image.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	"$DOCKER" -H "$N1" save -o "$tmp/image.tar" "$TAG"
	pids=()
	for i in "${others[@]}"; do
		(timeout 300 "$DOCKER" -H "unix://$(sock_of "$i")" load -q -i "$tmp/image.tar" >/dev/null) & pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || die "docker load failed"; done
	for i in "${others[@]}"; do
		got=$("$DOCKER" -H "unix://$(sock_of "$i")" image inspect -f '{{.Id}}' "$TAG")
		[[ $got == "$ID" ]] || die "$P-n$i has $TAG as $got, expected $ID"
	done
	log "copied to ${others[*]/#/$P-n} in $((SECONDS - t))s"
fi
echo "$ID"
