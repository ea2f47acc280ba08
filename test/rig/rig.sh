#!/usr/bin/env bash
# Practice cluster: N fake "DGX Spark" hosts on this machine, each one a network
# namespace with its own login user, sshd and dockerd.  See test/rig/README.md.
#
#   bash test/rig/rig.sh up [N]     # N hosts (default 4, max 8); runs `down` first
#   bash test/rig/rig.sh cluster N  # cluster.toml of the first N hosts (the others keep running)
#   bash test/rig/rig.sh down       # remove everything the rig made (safe to repeat)
#   bash test/rig/rig.sh status     # list hosts and whether sshd/dockerd are alive
#
# Env: RIG_DIR (default /tmp/launcher-rig), RIG_PREFIX (default lnch),
#      RIG_DOCKER (docker CLI to use; default: auto-detected, see docker_cli).
set -euo pipefail

RIG_DIR=${RIG_DIR:-/tmp/launcher-rig}
RIG_PREFIX=${RIG_PREFIX:-lnch}
MAX_HOSTS=8
MGMT_NET=10.231.0 # management network (root side .1)
FAB_NET=10.232.0  # fabric network (no address in the root namespace)
FAB_IFACE=enp1s0f1np1
FAB_MTU=9000
DOCKERD_WAIT=30 # seconds to wait for each dockerd

P=$RIG_PREFIX
BR_MGMT=$P-mgmt
BR_FAB=$P-fab
RUN_DIR=/run/$P              # short paths for sockets when RIG_DIR is long
MARKER=/run/$P.rigdir        # remembers RIG_DIR so `down` finds it after a crash

log() { printf '[rig %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { printf '[rig] ERROR: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- checks ----
sanity() {
	[[ $(id -u) == 0 ]] || die "must run as root"
	[[ $P =~ ^[a-z][a-z0-9]{1,9}$ ]] ||
		die "RIG_PREFIX must be 2-10 chars of [a-z0-9] starting with a letter (got '$P'): names like $P-mgmt must fit in 15 chars"
	[[ $RIG_DIR == /* && $RIG_DIR != / && $RIG_DIR != *' '* ]] ||
		die "RIG_DIR must be an absolute path without spaces, not / (got '$RIG_DIR')"
	RIG_DIR=${RIG_DIR%/}
	case $RIG_DIR in /tmp | /run | /home | /var | /usr | /etc | /root) die "RIG_DIR=$RIG_DIR is too dangerous to delete" ;; esac
}

need_tools() {
	local t
	for t in ip nsenter unshare dockerd sshd ssh ssh-keygen useradd userdel setsid timeout; do
		command -v "$t" >/dev/null || die "missing tool '$t' (apt-get install docker.io openssh-server openssh-client iproute2 util-linux passwd)"
	done
}

# The docker CLI to talk to the rig's dockerd 20.10 (API 1.41).  Debian's
# /usr/bin/docker matches the daemon; a newer client on PATH also negotiates
# down, but its `build` wants buildx, so prefer the Debian one.
docker_cli() {
	if [[ -n ${RIG_DOCKER:-} ]]; then echo "$RIG_DOCKER"
	elif [[ -x /usr/bin/docker ]]; then echo /usr/bin/docker
	else command -v docker || die "no docker CLI"; fi
}

# ---------------------------------------------------------------- naming ----
host_dir() { echo "$RIG_DIR/hosts/n$1"; }
# exec-root (holds containerd's sockets) and the docker socket: inside the host
# dir, unless that makes unix socket paths too long (limit 108 bytes).
exec_root() {
	local d
	d="$(host_dir "$1")/docker-exec"
	# longest socket under exec-root: containerd/containerd.sock.ttrpc (+ margin)
	if ((${#d} + 40 > 104)); then d=$RUN_DIR/n$1/exec; fi
	echo "$d"
}
sock_path() {
	local d
	d="$(host_dir "$1")/docker.sock"
	if ((${#d} > 100)); then d=$RUN_DIR/n$1/docker.sock; fi
	echo "$d"
}
mgmt_ip() { echo "$MGMT_NET.$((10 + $1))"; }
fab_ip() { echo "$FAB_NET.$((10 + $1))"; }
user_of() { echo "${P}u$1"; }

# --------------------------------------------------------------- helpers ----
# alive = exists and is not a zombie (PID 1 here may reap late)
pid_alive() {
	local st
	[[ ${1:-} =~ ^[0-9]+$ ]] || return 1
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	st=${st##*) }
	[[ ${st%% *} != Z ]]
}
pidfile_pid() { [[ -s $1 ]] && tr -dc 0-9 <"$1" || true; }

# kill a list of pids: TERM, wait up to $1 seconds, then KILL; then wait
# (bounded) until they are really gone, zombies included (PID 1 reaps late)
kill_pids() {
	local wait=$1; shift
	local pids=() all p i left
	for p in "$@"; do [[ $p =~ ^[0-9]+$ && $p != 1 && $ANCESTORS != *" $p "* ]] && pid_alive "$p" && pids+=("$p"); done
	((${#pids[@]})) || return 0
	all=("${pids[@]}")
	kill -TERM "${pids[@]}" 2>/dev/null || true
	for ((i = 0; i < wait * 10; i++)); do
		left=()
		for p in "${pids[@]}"; do pid_alive "$p" && left+=("$p"); done
		pids=("${left[@]}")
		((${#pids[@]})) || break
		sleep 0.1
	done
	((${#pids[@]})) && kill -KILL "${pids[@]}" 2>/dev/null
	# remember them: `down` waits at the end until they are reaped
	[[ -n ${KILLED_FILE:-} ]] && printf '%s\n' "${all[@]}" >>"$KILLED_FILE"
	return 0
}

# wait (bounded) until killed processes are really gone, zombies included
# (PID 1 may reap them a second or so late; zombies hold no namespaces or mounts)
wait_reaped() {
	local i p left
	[[ -s ${KILLED_FILE:-} ]] || return 0
	for ((i = 0; i < 50; i++)); do
		left=0
		while read -r p; do [[ -e /proc/$p ]] && left=1 && break; done <"$KILLED_FILE"
		((left)) || return 0
		sleep 0.1
	done
	return 0
}

# this script and its ancestors (never kill those, whatever their command line)
ANCESTORS=" "
p=$$
while [[ $p =~ ^[0-9]+$ && $p != 0 ]]; do
	ANCESTORS+="$p "
	p=$(awk '/^PPid:/{print $2}' "/proc/$p/status" 2>/dev/null) || break
done
unset p

# pids whose command line contains the fixed string $1 (not ourselves)
pids_matching() {
	local f p args
	for f in /proc/[0-9]*/cmdline; do
		p=${f#/proc/}; p=${p%/cmdline}
		[[ $p == "$BASHPID" || $ANCESTORS == *" $p "* ]] && continue
		args=()
		{ mapfile -d "" args <"$f"; } 2>/dev/null || continue
		[[ " ${args[*]} " == *"$1"* ]] && echo "$p"
	done
	return 0
}

# all hosts indexes the rig may have made (from namespaces, links, users, dirs)
known_indexes() {
	{
		ip netns list 2>/dev/null | awk '{print $1}' | sed -n "s/^$P-n\([0-9]\+\)$/\1/p"
		ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | sed -n "s/^$P[mf]\([0-9]\+\)$/\1/p"
		getent passwd | cut -d: -f1 | sed -n "s/^${P}u\([0-9]\+\)$/\1/p"
		local d
		for d in "${RIG_DIRS[@]}"; do ls "$d/hosts" 2>/dev/null | sed -n 's/^n\([0-9]\+\)$/\1/p' || true; done
		true
	} | sort -un
}

# directories the rig may have used: RIG_DIR, the one recorded by the last `up`,
# the short socket dir, and whatever running prefix dockerds were started with.
collect_rig_dirs() {
	RIG_DIRS=("$RIG_DIR" "$RUN_DIR")
	if [[ -s $MARKER ]]; then RIG_DIRS+=("$(head -n1 "$MARKER")"); fi
	local p args a
	for p in $(pids_matching "--group ${P}u"); do
		args=$(tr '\0' '\n' 2>/dev/null <"/proc/$p/cmdline") || continue
		a=$(grep -A1 -x -- '--data-root' <<<"$args" | tail -n1) || true
		[[ $a == */hosts/n*/docker-data ]] && RIG_DIRS+=("${a%/hosts/n*}")
	done
	local -A seen=(); local out=() d
	for d in "${RIG_DIRS[@]}"; do
		[[ $d == /* && $d != / && -z ${seen[$d]:-} ]] || continue
		seen[$d]=1; out+=("$d")
	done
	RIG_DIRS=("${out[@]}")
}

# ------------------------------------------------------------------ down ----
down_host() { # $1 = index
	local i=$1 ns=$P-n$i user d sock cli p pids
	user=$(user_of "$i")
	cli=$(docker_cli)
	for d in "${RIG_DIRS[@]}"; do
		# 1. remove containers while the daemon still answers (bounded)
		for sock in "$d/hosts/n$i/docker.sock" "$d/n$i/docker.sock"; do
			[[ -S $sock ]] || continue
			if timeout 5 "$cli" -H "unix://$sock" version >/dev/null 2>&1; then
				local ids
				ids=$(timeout 10 "$cli" -H "unix://$sock" ps -aq 2>/dev/null || true)
				if [[ -n $ids ]]; then
					# shellcheck disable=SC2086
					timeout 30 "$cli" -H "unix://$sock" rm -f $ids >/dev/null 2>&1 || log "n$i: could not remove all containers (continuing)"
				fi
			fi
		done
		# 2. sshd and dockerd (graceful: ~1 s), by pid file
		kill_pids 15 "$(pidfile_pid "$d/hosts/n$i/sshd.pid")" "$(pidfile_pid "$d/hosts/n$i/docker.pid")"
	done
	# 3. fallbacks: anything still running from the rig's paths
	pids=()
	for d in "${RIG_DIRS[@]}"; do
		pids+=($(pids_matching "$d/hosts/n$i/") $(pids_matching "$d/n$i/"))
	done
	pids+=($(pids_matching "--group $user"))
	# login sessions and leftovers of the host user
	if getent passwd "$user" >/dev/null; then pids+=($(pgrep -u "$user" 2>/dev/null || true)); fi
	# everything still living in the host's network namespace (e.g. host-network containers)
	if [[ -e /run/netns/$ns ]]; then pids+=($(ip netns pids "$ns" 2>/dev/null || true)); fi
	((${#pids[@]})) && kill_pids 1 "${pids[@]}"
	# processes of containers whose dockerd/shim died (kill -9), found by cgroup:
	# SIGKILL straight away (a container's PID 1 ignores SIGTERM)
	pids=()
	for d in "${RIG_DIRS[@]}"; do
		for p in "$d"/hosts/n"$i"/docker-data/containers/*/; do
			[[ -d $p ]] || continue
			p=$(basename "$p")
			pids+=($(cat /sys/fs/cgroup/pids/docker/"$p"/cgroup.procs /sys/fs/cgroup/systemd/docker/"$p"/cgroup.procs 2>/dev/null || true))
		done
	done
	((${#pids[@]})) && kill_pids 0 "${pids[@]}"
	# and their cgroups (a dockerd killed with -9 leaves them behind); retry while busy
	local cg t left
	for ((t = 0; t < 20; t++)); do
		left=0
		for d in "${RIG_DIRS[@]}"; do
			for p in "$d"/hosts/n"$i"/docker-data/containers/*/; do
				[[ -d $p ]] || continue
				for cg in /sys/fs/cgroup/*/docker/"$(basename "$p")"; do
					[[ -d $cg ]] && { rmdir "$cg" 2>/dev/null || left=1; }
				done
			done
		done
		((left)) || break
		sleep 0.1
	done
	return 0
}

unmount_rig() {
	local d m
	local mounts=()
	for d in "${RIG_DIRS[@]}"; do
		while IFS= read -r m; do mounts+=("$m"); done < <(
			awk '{print $2}' /proc/mounts | sed 's/\\040/ /g' |
				grep -E "^$(printf '%s' "$d" | sed 's/[][\.*^$/]/\\&/g')(/|$)" || true)
	done
	((${#mounts[@]})) || return 0
	# deepest first
	printf '%s\n' "${mounts[@]}" | awk '{print length, $0}' | sort -rn | cut -d' ' -f2- | sort -u -r |
		while IFS= read -r m; do umount -l "$m" 2>/dev/null || umount -fl "$m" 2>/dev/null || log "could not unmount $m"; done
}

cmd_down() {
	sanity
	collect_rig_dirs
	local idx i l
	KILLED_FILE=$(mktemp "${TMPDIR:-/tmp}/$P-killed.XXXXXX")
	trap 'rm -f "$KILLED_FILE"' EXIT
	idx=$(known_indexes)
	# hosts in parallel: stopping a dockerd takes about a second
	local jobs=()
	for i in $idx; do down_host "$i" & jobs+=($!); done
	for i in "${jobs[@]}"; do wait "$i" || log "stopping a host failed (continuing)"; done
	unmount_rig
	for i in $idx; do
		if [[ -e /run/netns/$P-n$i ]]; then
			ip netns del "$P-n$i" 2>/dev/null || { umount -l "/run/netns/$P-n$i" 2>/dev/null || true; rm -f "/run/netns/$P-n$i"; }
		fi
	done
	# leftover root-side veths (their peers die with the namespace; these may not)
	for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^$P[mf][0-9]+$" || true); do
		ip link del "$l" 2>/dev/null || true
	done
	for l in "$BR_MGMT" "$BR_FAB"; do ip link show "$l" >/dev/null 2>&1 && ip link del "$l"; done
	if ip route show type unreachable | grep -q "^unreachable $FAB_NET.0/24"; then ip route del unreachable "$FAB_NET.0/24"; fi
	for i in $idx; do
		local user
		user=$(user_of "$i")
		if getent passwd "$user" >/dev/null; then
			kill_pids 2 $(pgrep -u "$user" 2>/dev/null || true)
			userdel -r -f "$user" >/dev/null 2>&1 || userdel -f "$user" || log "could not delete user $user"
			rm -rf "/home/$user"
		fi
		getent group "$user" >/dev/null && { groupdel "$user" 2>/dev/null || true; }
	done
	for d in "${RIG_DIRS[@]}"; do
		[[ -e $d ]] || continue
		unmount_rig # paranoia: nothing mounted below what we delete
		rm -rf --one-file-system "$d" 2>/dev/null || rm -rf "$d"
	done
	rm -f "$MARKER"
	wait_reaped
	# dirs dockerd/sshd create at fixed places; remove them only if we made them and they are unused
	rmdir /run/docker/plugins /run/docker /run/containerd/s /run/containerd 2>/dev/null || true
	rmdir /sys/fs/cgroup/*/docker 2>/dev/null || true # only if empty, i.e. unused
	if [[ -e /run/$P.made-run-netns ]]; then
		if [[ -z $(ls -A /run/netns 2>/dev/null) ]]; then umount /run/netns 2>/dev/null || true; rmdir /run/netns 2>/dev/null || true; fi
		rm -f "/run/$P.made-run-netns"
	fi
	if [[ -e /run/$P.made-run-sshd ]]; then
		pgrep -x sshd >/dev/null || rmdir /run/sshd 2>/dev/null || true
		rm -f "/run/$P.made-run-sshd"
	fi
	log "down: nothing of prefix '$P' is left${idx:+ (removed hosts: $(echo $idx | sed 's/[0-9]\+/n&/g'))}"
}

# ---------------------------------------------------------------- status ----
cmd_status() {
	sanity
	collect_rig_dirs
	local d=$RIG_DIR
	[[ -d $d/hosts || ! -s $MARKER ]] || d=$(head -n1 "$MARKER")
	local idx i cli s_ok d_ok
	cli=$(docker_cli)
	idx=$(known_indexes)
	if [[ -z $idx ]]; then echo "no practice hosts (prefix '$P')"; return 0; fi
	printf '%-10s %-8s %-12s %-12s %-6s %s\n' HOST USER MGMT_IP FABRIC_IP SSHD DOCKERD
	for i in $idx; do
		s_ok=down; d_ok=down
		pid_alive "$(pidfile_pid "$d/hosts/n$i/sshd.pid")" && s_ok=up
		if pid_alive "$(pidfile_pid "$d/hosts/n$i/docker.pid")"; then
			d_ok="up(unresponsive)"
			RIG_DIR=$d timeout 5 "$cli" -H "unix://$(RIG_DIR=$d sock_path "$i")" version >/dev/null 2>&1 && d_ok=up
		fi
		printf '%-10s %-8s %-12s %-12s %-6s %s\n' "$P-n$i" "$(user_of "$i")" "$(mgmt_ip "$i")" "$(fab_ip "$i")" "$s_ok" "$d_ok"
	done
	[[ -f $d/ssh_config ]] && echo "ssh: ssh -F $d/ssh_config $P-n1 ...    cluster: $d/cluster.toml"
	return 0
}

# -------------------------------------------------------------------- up ----
T0=0
step() { # print the time of the previous step, start a new one
	local now
	now=$(date +%s.%N)
	if [[ -n ${STEP_NAME:-} ]]; then
		printf '[rig] %-34s %5.2fs\n' "$STEP_NAME" "$(awk "BEGIN{print $now-$STEP_T}")" >&2
	fi
	STEP_NAME=${1:-}; STEP_T=$now
}

setup_network() { # $1 = N
	local n=$1 i ns
	ip link add "$BR_MGMT" type bridge
	ip addr add "$MGMT_NET.1/24" dev "$BR_MGMT"
	ip link add "$BR_FAB" type bridge
	ip link set "$BR_FAB" mtu "$FAB_MTU"
	for ((i = 1; i <= n; i++)); do
		ns=$P-n$i
		ip netns add "$ns"
		ip link add "${P}m$i" type veth peer name eth0 netns "$ns"
		ip link add "${P}f$i" mtu "$FAB_MTU" type veth peer name "$FAB_IFACE" mtu "$FAB_MTU" netns "$ns"
		ip link set "${P}m$i" master "$BR_MGMT" up
		ip link set "${P}f$i" master "$BR_FAB" up
		ip -n "$ns" addr add "$(mgmt_ip "$i")/24" dev eth0
		ip -n "$ns" addr add "$(fab_ip "$i")/24" dev "$FAB_IFACE"
		ip -n "$ns" link set lo up
		ip -n "$ns" link set eth0 up
		ip -n "$ns" link set "$FAB_IFACE" up
		# own UTS namespace so `hostname` (and docker info's Name) says $P-n$i
		mkdir -p "$RUN_DIR/n$i"
		touch "$RUN_DIR/n$i/uts"
		unshare --uts="$RUN_DIR/n$i/uts" hostname "$ns"
	done
	ip link set "$BR_FAB" mtu "$FAB_MTU" up
	ip link set "$BR_MGMT" up
	# the root namespace has no fabric address: make the fabric subnet
	# unreachable here so nothing leaks to the default gateway by mistake
	ip route replace unreachable "$FAB_NET.0/24"
}

setup_user() { # $1 = index
	local i=$1 user home
	user=$(user_of "$i"); home=/home/$user
	useradd -m -d "$home" -s /bin/sh -U "$user"
	# sshd without PAM refuses accounts whose password is locked ('!'): use '*'
	usermod -p '*' "$user"
	install -d -m 700 -o "$user" -g "$user" "$home/.ssh"
	install -m 600 -o "$user" -g "$user" "$RIG_DIR/id_ed25519.pub" "$home/.ssh/authorized_keys"
}

start_dockerd() { # $1 = index
	local i=$1 hd er sock
	hd=$(host_dir "$i"); er=$(exec_root "$i"); sock=$(sock_path "$i")
	mkdir -p "$hd/docker-data" "$hd/tmp" "$er" "$(dirname "$sock")"
	# own identity key (else every dockerd shares /etc/docker/key.json = same ID)
	printf '{\n  "deprecated-key-path": "%s"\n}\n' "$hd/key.json" >"$hd/daemon.json"
	# nsenter (not `ip netns exec`): keep the root mount namespace so dockerd
	# sees the cgroup mounts.  setsid: survive this script.
	# TMPDIR: containerd writes stack dumps (containerd.PID.stacks.log) there
	TMPDIR=$hd/tmp setsid nsenter --net="/var/run/netns/$P-n$i" --uts="$RUN_DIR/n$i/uts" \
		dockerd --data-root "$hd/docker-data" --exec-root "$er" \
		--host "unix://$sock" --pidfile "$hd/docker.pid" \
		--iptables=false --ip-masq=false --bridge=none --group "$(user_of "$i")" \
		--storage-driver overlay2 --log-driver json-file \
		--config-file "$hd/daemon.json" \
		</dev/null >"$hd/dockerd.log" 2>&1 &
	DOCKERD_PIDS[$i]=$!
}

write_sshd_config() { # $1 = index
	local i=$1 hd
	hd=$(host_dir "$i")
	ssh-keygen -q -t ed25519 -N '' -C "$P-n$i" -f "$hd/ssh_host_ed25519_key"
	# $hd/bin leads the PATH of the host's SSH sessions (sshd applies SetEnv after its default
	# PATH: openssh-portable session.c do_setup_env), empty: a test puts a tool of its own there,
	# e.g. a fake nvidia-smi, to make one host differ. The rest is Debian's default PATH for sshd.
	mkdir -p "$hd/bin"
	cat >"$hd/sshd_config" <<EOF
# sshd of practice host $P-n$i (made by test/rig/rig.sh)
ListenAddress $(mgmt_ip "$i"):22
ListenAddress $(fab_ip "$i"):22
HostKey $hd/ssh_host_ed25519_key
PidFile $hd/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
StrictModes yes
PermitRootLogin no
AllowUsers $(user_of "$i")
UsePAM no
PrintMotd no
PrintLastLog no
UseDNS no
X11Forwarding no
AllowTcpForwarding yes
AllowStreamLocalForwarding yes
MaxSessions 64
MaxStartups 64:30:128
Subsystem sftp internal-sftp
SetEnv DOCKER_HOST=unix://$(sock_path "$i") PATH=$hd/bin:/usr/local/bin:/usr/bin:/bin:/usr/games
EOF
	chmod 600 "$hd/sshd_config"
	sshd -t -f "$hd/sshd_config" || die "bad sshd config for n$i"
}

wait_dockerd() { # $1 = index, $2 = its pid; returns when `docker info` works
	local i=$1 pid=$2 sock cli t
	sock=$(sock_path "$i"); cli=$(docker_cli)
	for ((t = 0; t < DOCKERD_WAIT * 10; t++)); do
		if [[ -S $sock ]] && timeout 5 "$cli" -H "unix://$sock" info --format '{{.ID}}' >/dev/null 2>&1; then return 0; fi
		if ! pid_alive "$pid"; then
			tail -n 20 "$(host_dir "$i")/dockerd.log" >&2 || true
			die "dockerd of $P-n$i exited (log: $(host_dir "$i")/dockerd.log)"
		fi
		sleep 0.1
	done
	tail -n 20 "$(host_dir "$i")/dockerd.log" >&2 || true
	die "dockerd of $P-n$i did not answer within ${DOCKERD_WAIT}s (log: $(host_dir "$i")/dockerd.log)"
}

# --ulimit memlock=-1 needs CAP_SYS_RESOURCE in dockerd; some sandboxes (e.g.
# firecracker VMs) drop it, and then every container start fails with
# "error setting rlimit type 8: operation not permitted".  There, cap memlock
# at the current hard limit instead (and say so in cluster.toml).
memlock_arg() {
	local hard
	if ! command -v prlimit >/dev/null || prlimit --memlock=unlimited:unlimited true 2>/dev/null; then
		echo "-1"; return
	fi
	hard=$(ulimit -Hl)
	if [[ $hard == unlimited ]]; then echo "-1"; else echo "$((hard * 1024))"; fi
}

# cluster.toml naming the first $1 hosts; hosts past them keep running, unnamed
# (the suite reuses one rig of many hosts for test files that want fewer)
write_cluster_file() { # $1 = N
	local n=$1 i memlock memlock_note=""
	memlock=$(memlock_arg)
	if [[ $memlock != -1 ]]; then
		memlock_note=$'\n'"# memlock: this machine cannot raise RLIMIT_MEMLOCK (no CAP_SYS_RESOURCE), so it is capped at the hard limit ($memlock bytes) instead of -1"
		log "warning: cannot raise RLIMIT_MEMLOCK here (no CAP_SYS_RESOURCE): cluster.toml uses memlock=$memlock instead of -1"
	fi
	cat >"$RIG_DIR/cluster.toml.new" <<EOF
# Practice cluster made by test/rig/rig.sh ($n hosts on this machine; not real Sparks).
name = "practice"

[ssh]
config = "ssh_config"          # relative to this file

[docker]
# the practice hosts have no GPUs or InfiniBand devices$memlock_note
run_args = ["--network", "host", "--ulimit", "memlock=$memlock"]
EOF
	for ((i = 1; i <= n; i++)); do
		cat >>"$RIG_DIR/cluster.toml.new" <<EOF

[[nodes]]
name = "n$i"
host = "$P-n$i"
user = "$(user_of "$i")"
fabric_ip = "$(fab_ip "$i")"
fabric_iface = "$FAB_IFACE"
EOF
	done
	# rename(2): a reader sees the old file or the new one, never half of one
	mv "$RIG_DIR/cluster.toml.new" "$RIG_DIR/cluster.toml"
}

write_client_files() { # $1 = N
	local n=$1 i
	: >"$RIG_DIR/known_hosts"
	: >"$RIG_DIR/ssh_config"
	for ((i = 1; i <= n; i++)); do
		local hd
		hd=$(host_dir "$i")
		echo "$P-n$i,$(mgmt_ip "$i"),$(fab_ip "$i") $(cut -d' ' -f1,2 "$hd/ssh_host_ed25519_key.pub")" >>"$RIG_DIR/known_hosts"
		cat >>"$RIG_DIR/ssh_config" <<EOF
Host $P-n$i
  HostName $(mgmt_ip "$i")
  User $(user_of "$i")
  IdentityFile $RIG_DIR/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $RIG_DIR/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 5

EOF
	done
	write_cluster_file "$n"
}

# `cluster N`: cluster.toml of the first N hosts of a rig that is up (ssh_config keeps them all)
cmd_cluster() {
	local n=${1:-} made
	sanity
	[[ -f $RIG_DIR/ssh_config ]] || die "no practice cluster in $RIG_DIR (run: $0 up N)"
	made=$(grep -c '^Host ' "$RIG_DIR/ssh_config")
	[[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= made)) || die "N must be 1..$made, the hosts this rig has (got '$n')"
	write_cluster_file "$n"
}

verify_host() { # $1 = index; prints nothing on success
	local i=$1 out want_id want_home cli
	cli=$(docker_cli)
	# the daemon ID, name and root dir seen through ssh must be this host's own
	want_id=$(timeout 5 "$cli" -H "unix://$(sock_path "$i")" info --format '{{.ID}} {{.Name}} {{.DockerRootDir}}')
	[[ $want_id == *" $P-n$i $(host_dir "$i")/docker-data" ]] || die "dockerd of $P-n$i reports unexpected identity: $want_id"
	want_home=/home/$(user_of "$i")
	out=$(timeout 20 ssh -F "$RIG_DIR/ssh_config" "$P-n$i" 'echo ~; docker info --format "{{.ID}} {{.Name}} {{.DockerRootDir}}"' 2>&1) ||
		die "ssh to $P-n$i failed: $out"
	[[ $out == "$want_home"$'\n'"$want_id" ]] ||
		die "ssh to $P-n$i: expected home $want_home and docker ID $want_id, got: $out"
}

cmd_up() {
	local n=${1:-4}
	[[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= MAX_HOSTS)) || die "N must be 1..$MAX_HOSTS (got '$n')"
	sanity; need_tools
	local t_start i
	t_start=$(date +%s.%N)
	step "down (stale hosts)"
	cmd_down
	step "directories + client key"
	mkdir -p "$RIG_DIR/hosts" "$RUN_DIR"
	# sshd's privilege separation dir
	if [[ ! -d /run/sshd ]]; then mkdir -m 755 /run/sshd; touch "/run/$P.made-run-sshd"; fi
	[[ -d /run/netns ]] || touch "/run/$P.made-run-netns" # `ip netns add` makes it (a mount point)
	chmod 755 "$RIG_DIR"
	echo "$RIG_DIR" >"$MARKER"
	for ((i = 1; i <= n; i++)); do mkdir -p "$(host_dir "$i")"; done
	ssh-keygen -q -t ed25519 -N '' -C "launcher-rig-client" -f "$RIG_DIR/id_ed25519"
	step "network (namespaces, bridges, veths)"
	setup_network "$n"
	step "users"
	for ((i = 1; i <= n; i++)); do setup_user "$i"; done
	step "start dockerds (background)"
	DOCKERD_PIDS=()
	for ((i = 1; i <= n; i++)); do start_dockerd "$i"; done
	step "sshd configs + host keys"
	for ((i = 1; i <= n; i++)); do write_sshd_config "$i"; done
	step "start sshds"
	for ((i = 1; i <= n; i++)); do
		nsenter --uts="$RUN_DIR/n$i/uts" ip netns exec "$P-n$i" /usr/sbin/sshd -f "$(host_dir "$i")/sshd_config" -E "$(host_dir "$i")/sshd.log" ||
			die "sshd of $P-n$i did not start (see $(host_dir "$i")/sshd.log)"
	done
	step "client files (ssh_config, known_hosts, cluster.toml)"
	write_client_files "$n"
	step "wait for dockerds"
	local pids=()
	for ((i = 1; i <= n; i++)); do wait_dockerd "$i" "${DOCKERD_PIDS[$i]}" & pids+=($!); done
	for i in "${pids[@]}"; do wait "$i" || die "a dockerd did not come up"; done
	step "verify (ssh -> own home + own dockerd)"
	pids=()
	for ((i = 1; i <= n; i++)); do verify_host "$i" & pids+=($!); done
	for i in "${pids[@]}"; do wait "$i" || die "verification failed"; done
	step
	log "up: $n hosts ready in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N)-$t_start}")s"
	echo "ssh -F $RIG_DIR/ssh_config $P-n1 docker info    # cluster file: $RIG_DIR/cluster.toml"
}

case ${1:-} in
up) shift; cmd_up "$@" ;;
cluster) shift; cmd_cluster "$@" ;;
down) cmd_down ;;
status) cmd_status ;;
*) echo "usage: $0 up [N] | cluster N | down | status   (env RIG_DIR=$RIG_DIR RIG_PREFIX=$P)" >&2; exit 2 ;;
esac
