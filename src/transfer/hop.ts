import { SSH_FAILED } from "../remote/transport.js";
import { WRITE_ALL_PERL } from "./perl-snippets.js";

/**
 * One hop of a node-to-node transfer: the program each node runs, and the one typed home of the
 * lines it reports (port, accepted, connected, unreachable, bytes, done, ...).
 *
 * Why perl: the end that receives must listen on a TCP port, and a Spark (DGX OS, Ubuntu) has
 * neither socat nor a netcat we can count on (the practice hosts, Debian 12, have neither), while
 * perl-base, with IO::Socket::INET and IO::Select, is Essential in Debian and Ubuntu: it is on
 * every node. bash's /dev/tcp could send but never listen, so both ends use the same program.
 *
 * The node's side, as it runs (fd 3: launcher's control lines in, from the SSH session's stdin;
 * fd 4: the report lines out, the session's stdout):
 *   1. recv: its own one-time secret, the first control line (never in argv, the environment, a
 *      log or the network: each receiver has its own, so one hop's secret opens no other);
 *   2. recv: listen on the address given (port 0: the kernel picks a free one), report `port N`,
 *      then accept connections until one proves it knows the secret (AUTH below; any other is
 *      closed within 2 s and the hop listens on), report `accepted PEER` and stop listening: one
 *      sender, once;
 *   3. control lines `next HOST PORT SECRET` (connect, AUTH with the next receiver's secret:
 *      report `connected`, or `unreachable HOST:PORT WHY` and wait for another line) or `last`;
 *      before them, to a sender given a filter program: `arg WORD` lines, the filter's arguments
 *      (see FILTER below);
 *   4. pump: every chunk read (recv: from the socket; send: from stdin, what the payload command
 *      writes) is written to the next hop, then (recv) to stdout, the payload's sink, after the
 *      first SKIP bytes (a node that already holds part of a file takes only the rest). A next hop
 *      that fails is reported (`forward-failed`) and dropped: this node still takes its own copy.
 *      A hop that fails itself resets the connection to the next (see `cut`): a stream cut short
 *      never ends as if it were whole further down the chain.
 *      `bytes N` once a second, `done N` at the end.
 * AUTH, both ways, so neither the secret nor anything replayable crosses the network: the receiver
 * sends `challenge NR`, the sender answers `proof NS HMAC(secret, "send NR NS")`, and only then does
 * the receiver answer `proof HMAC(secret, "recv NR NS")`, which the sender checks before any byte of
 * payload: a stale listener or another process on the port gets nothing. HMAC-SHA-256 (RFC 2104)
 * over coreutils' sha256sum: perl-base, the perl every node has, ships no Digest::SHA (Debian puts
 * it in libperl5.36), while coreutils is Essential too.
 * FILTER (send): a perl program the payload goes through on its way to the wire, started with the
 * `arg` words once the chain is linked. It is why a source can start writing before launcher knows
 * what to leave out: the image push starts `docker save` (Docker's own image store writes its whole
 * export to a temporary folder before the first byte, moby image/tarexport/save.go) while the nodes are still
 * being asked which layers they store, and says which to leave out later. A filter that fails fails
 * the hop (no `done`) and resets the connection to the next one, which fails too. Without
 * arguments the filter is not started (the tar filter would pass all).
 * The end of the control input (launcher gone or interrupted) ends the hop at any step (exit 3):
 * a sink cut short takes nothing (a truncated `docker load` tags no image; a partial blob stays
 * partial and is checked before it is used).
 */
export const HOP_PERL = String.raw`
use strict; use warnings; use IO::Socket::INET; use IO::Select; use POSIX ();
$SIG{PIPE} = 'IGNORE';
my ($role, $listen, $skip, $filter) = @ARGV;
open(my $ctl, '<&=', 3) or die "no control input\n";
open(my $rep, '>&=', 4) or die "no report output\n";
select((select($rep), $| = 1)[0]);
sub report { print $rep "@_\n"; }
my %buf;
sub line {
  my ($fh, $secs) = @_; my $end = time + $secs; my $sel = IO::Select->new($fh);
  while (1) {
    my $b = $buf{$fh} // '';
    my $i = index($b, "\n");
    if ($i >= 0) { $buf{$fh} = substr($b, $i + 1); return substr($b, 0, $i); }
    return undef if length($b) > 512;
    my $left = $end - time; return undef if $left <= 0;
    return undef unless $sel->can_read($left);
    my $n = sysread($fh, my $c, 1); return undef unless $n;
    $buf{$fh} = $b . $c;
  }
}
sub same {
  my ($a, $b) = @_; return 0 unless length($a) == length($b);
  my $d = 0; $d |= ord(substr($a, $_, 1)) ^ ord(substr($b, $_, 1)) for 0 .. length($a) - 1; return $d == 0;
}
sub nonce {
  open(my $u, '<', '/dev/urandom') or die "no /dev/urandom: $!\n";
  (sysread($u, my $b, 16) // 0) == 16 or die "short read from /dev/urandom\n"; close $u; return unpack('H*', $b);
}
sub sha256 {
  pipe(my $r, my $w) or die "pipe: $!\n";
  my $pid = open(my $to, '|-') // die "fork: $!\n";
  if (!$pid) { open(STDOUT, '>&', $w) or POSIX::_exit(1); exec('sha256sum') or POSIX::_exit(1); }
  close $w; binmode $to; print $to $_[0]; close $to; my $h = <$r> // ''; close $r;
  $h =~ /^([0-9a-f]{64})/ or die "sha256sum gave no digest\n"; return pack('H*', $1);
}
sub hmac {
  my ($k, $m) = @_; $k = sha256($k) if length($k) > 64; $k .= "\0" x (64 - length $k);
  return unpack('H*', sha256(($k ^ ("\x5c" x 64)) . sha256(($k ^ ("\x36" x 64)) . $m)));
}
${WRITE_ALL_PERL}
# A pipe holds 64 KiB by default: each 1 MiB chunk would take 16 wake-ups of the process at its
# other end, and a sink that pauses (docker load storing a layer) would hold up the forwarding at
# once. 1 MiB (Linux's pipe-max-size for everyone) absorbs that. F_SETPIPE_SZ is 1031 (Linux
# fcntl(2)); on a kernel or a file that refuses it the pipe just stays as it was.
sub big_pipe { fcntl($_[0], 1031, 1 << 20); }
my $in;
if ($role eq 'recv') {
  my $secret = line($ctl, 60);
  unless (defined $secret && length($secret) >= 32) { report("error", "no secret on the control input"); exit 2; }
  # The sender proves itself first (2 s for its line: a port scanner holds the hop up no longer).
  my $admit = sub {
    my ($c) = @_; my $nr = nonce(); write_all($c, "challenge $nr\n") or return 0;
    my $l = line($c, 2); return 0 unless defined $l;
    my ($ns, $proof) = $l =~ /^proof ([0-9a-f]{32}) ([0-9a-f]{64})$/ or return 0;
    return 0 unless same($proof, hmac($secret, "send $nr $ns"));
    return write_all($c, "proof " . hmac($secret, "recv $nr $ns") . "\n");
  };
  my $srv = IO::Socket::INET->new(LocalAddr => $listen, LocalPort => 0, Listen => 8, ReuseAddr => 1, Proto => 'tcp')
    or do { report("error", "cannot listen on $listen: $@"); exit 2; };
  report("port", $srv->sockport);
  my $sel = IO::Select->new($srv, $ctl); my $end = time + 300;
  while (!$in) {
    my $left = $end - time; if ($left <= 0) { report("error", "no sender connected within 300 s"); exit 4; }
    for my $h ($sel->can_read($left)) {
      if ($h == $ctl) { my $n = sysread($ctl, my $c, 1); exit 3 unless $n; $buf{$ctl} = ($buf{$ctl} // '') . $c; next; }
      my $c = $srv->accept or next;
      if ($admit->($c)) { $in = $c; report("accepted", $c->peerhost); last; }
      close $c;
    }
  }
  close $srv;
} else { $in = \*STDIN; }
my ($next, @args, $fpid);
# Ends the hop on a failure once it may be linked: the next hop gets a reset (SO_LINGER 0), not an
# end of stream, so that it fails too instead of taking what came as the whole (and passes the
# reset on); a filter is stopped too (perl would wait for it at exit, and it waits on the payload).
sub cut {
  my ($code, @why) = @_;
  report("error", @why) if @why;
  if ($next) { setsockopt($next, Socket::SOL_SOCKET(), Socket::SO_LINGER(), pack('ii', 1, 0)); close $next; }
  kill('TERM', $fpid) if $fpid;
  exit $code;
}
while (!$next) {
  my $cmd = line($ctl, 3600); exit 3 unless defined $cmd;
  if ($role eq 'send' && $filter ne '' && $cmd =~ /^arg (\S+)$/) { push @args, $1; next; }
  last if $cmd eq 'last';
  my ($host, $port, $key) = $cmd =~ /^next (\S+) (\d+) ([0-9a-f]{64})$/ or do { report("error", "bad control line"); exit 2; };
  my $s = IO::Socket::INET->new(PeerAddr => $host, PeerPort => $port, Proto => 'tcp', Timeout => 5);
  if (!$s) { report("unreachable", "$host:$port", $@ || $!); next; }
  # 10 s: the receiver may be turning away another connection first (2 s each).
  my ($nr) = (line($s, 10) // '') =~ /^challenge ([0-9a-f]{32})$/;
  my $ns = nonce();
  my $ok = defined $nr && write_all($s, "proof $ns " . hmac($key, "send $nr $ns") . "\n") ? line($s, 5) : undef;
  if (defined $ok && same($ok, "proof " . hmac($key, "recv $nr $ns"))) { $next = $s; report("connected", "$host:$port"); }
  else { close $s; report("unreachable", "$host:$port", "it did not prove it knows its secret"); }
}
if (@args) {
  # The filter reads what the payload command writes (this hop's stdin) and writes to a pipe this
  # hop reads; it gets neither the control input nor the report output.
  $fpid = open(my $f, '-|') // do { report("error", "cannot start the filter: $!"); exit 2; };
  if (!$fpid) { POSIX::close(3); POSIX::close(4); exec('perl', '-e', $filter, '--', @args) or POSIX::_exit(127); }
  $in = $f;
}
binmode $in; binmode STDOUT;
big_pipe($role eq 'recv' ? \*STDOUT : $in);
my $sel = IO::Select->new($in, $ctl);
my ($total, $shown, $data) = (0, time, '');
PUMP: while (1) {
  for my $h ($sel->can_read(1)) {
    if ($h == $ctl) { my $n = sysread($ctl, my $c, 4096); cut(3) unless $n; next; }
    # One buffer for the whole stream, written from where it is: no copy of a chunk per chunk.
    my $n = sysread($in, $data, 1 << 20);
    cut(6, "reading the payload: $!") unless defined $n;
    last PUMP if $n == 0;
    if ($next && !write_all($next, $data)) { report("forward-failed", "$!"); close $next; undef $next; }
    if ($role eq 'recv') {
      my $k = $skip < $n ? $skip : $n; $skip -= $k;
      cut(5, "writing the payload: $!") if $k < $n && !write_all(\*STDOUT, $data, $k);
    }
    $total += $n;
  }
  if (time > $shown) { report("bytes", $total); $shown = time; }
}
# A filter that failed has cut the payload short.
if ($fpid) {
  my $ok = close($in); my $st = $?; undef $fpid;
  cut(6, "the filter failed (" . (($st & 127) ? "signal " . ($st & 127) : "exit " . ($st >> 8)) . ")") unless $ok;
}
if ($next) { shutdown($next, 1); my $x; 1 while sysread($next, $x, 4096); close $next; }
close STDOUT;
report("done", $total);
`;

/**
 * The node's shell around the hop: fd 3 and 4 as above, the payload command in a pipeline with
 * pipefail (its failure is the hop's), its own output to stderr (the session's stdout carries
 * only report lines). $1 the perl program, $2 send|recv, $3 listen address (recv), $4 bytes to
 * skip (recv), $5 the filter program (send; may be empty), then the payload command: what writes
 * the payload (send) or takes it (recv).
 */
const HOP_SCRIPT = `hop=$1 role=$2 listen=$3 skip=$4 filter=$5; shift 5
exec 3<&0 4>&1 </dev/null
set -o pipefail
if [ "$role" = send ]; then "$@" 3<&- 4>&- | perl -e "$hop" send "" 0 "$filter"
else perl -e "$hop" recv "$listen" "$skip" "" | "$@" 3<&- 4>&- >&2; fi`;

export type HopRole = "send" | "recv";

/** The argv that runs one hop on a node (bash: pipefail, and a Spark has it). `filter`: see FILTER above (send only). */
export function hopArgv(role: HopRole, listen: string, skip: number, command: readonly string[], filter = ""): string[] {
  return ["bash", "-c", HOP_SCRIPT, "bash", HOP_PERL, role, listen, String(skip), filter, ...command];
}

/** What a hop reports, one line each. */
export type HopEvent =
  | { readonly kind: "port"; readonly port: number }
  | { readonly kind: "accepted"; readonly peer: string }
  | { readonly kind: "connected"; readonly target: string }
  | { readonly kind: "unreachable"; readonly target: string; readonly why: string }
  | { readonly kind: "forward-failed"; readonly why: string }
  | { readonly kind: "bytes"; readonly bytes: number }
  | { readonly kind: "done"; readonly bytes: number }
  | { readonly kind: "error"; readonly message: string };

const count = (word: string | undefined): number | undefined => (word !== undefined && /^\d+$/.test(word) ? Number(word) : undefined);

// One decoder per word: the words are HOP_PERL's `report(...)` calls above.
const DECODERS: Readonly<Record<string, (rest: string[]) => HopEvent | undefined>> = {
  port: ([p]) => (count(p) === undefined ? undefined : { kind: "port", port: count(p) as number }),
  accepted: ([peer]) => ({ kind: "accepted", peer: peer ?? "" }),
  connected: ([target]) => ({ kind: "connected", target: target ?? "" }),
  unreachable: ([target, ...why]) => ({ kind: "unreachable", target: target ?? "", why: why.join(" ") }),
  "forward-failed": (why) => ({ kind: "forward-failed", why: why.join(" ") }),
  bytes: ([n]) => (count(n) === undefined ? undefined : { kind: "bytes", bytes: count(n) as number }),
  done: ([n]) => (count(n) === undefined ? undefined : { kind: "done", bytes: count(n) as number }),
  error: (message) => ({ kind: "error", message: message.join(" ") }),
};

/** A report line as an event; undefined for anything else (a warning some tool printed). */
export function decodeHopLine(line: string): HopEvent | undefined {
  const [word, ...rest] = line.trimEnd().split(" ");
  const decode = word === undefined ? undefined : DECODERS[word];
  return decode?.(rest);
}

/** The control lines launcher sends a hop. */
export const control = {
  secret: (secret: string): string => `${secret}\n`,
  /** `secret`: the next receiver's own, for AUTH (the line goes over launcher's SSH session only). */
  next: (host: string, port: number, secret: string): string => `next ${host} ${port} ${secret}\n`,
  last: (): string => "last\n",
  /** One argument of the sender's filter: a word of printable ASCII (HOP_PERL reads lines of at most 512 bytes). */
  arg: (word: string): string => {
    if (!/^[\x21-\x7e]{1,400}$/.test(word)) throw new Error(`not a filter argument a hop takes: ${JSON.stringify(word)}`);
    return `arg ${word}\n`;
  },
};

/**
 * The exit status launcher's node-side writers (CACHE_PERL's append, ./hf-cache.ts) end with when
 * the disk is full: ENOSPC's own number on Linux (include/uapi/asm-generic/errno-base.h), so a
 * full disk is told by the status, never by a message's text.
 */
export const NO_SPACE_EXIT = 28;

/**
 * Why a node's SSH session running one of launcher's programs ended with `code`: the statuses
 * those programs and ssh define said in words (ssh(1): 255 "if an error occurred", see
 * src/remote/transport.ts), else the status and the last lines it printed. `where`: what it wrote
 * (NODE:PATH), for a full disk.
 */
export function endWhy(code: number, stderr: string, where: string): string {
  const tail = stderr.trim().split("\n").slice(-4).join(" / ");
  if (code === SSH_FAILED) return `SSH connection lost (ssh exit ${code}${tail === "" ? "" : `: ${tail}`})`;
  if (code === NO_SPACE_EXIT) return `no space on ${where}${tail === "" ? "" : ` (${tail})`}`;
  return `exit ${code}${tail === "" ? "" : `: ${tail}`}`;
}

/** Is `code` one whose meaning endWhy says (it then comes before the hop's own report of the broken pipe it caused)? */
export const definedEnd = (code: number): boolean => code === SSH_FAILED || code === NO_SPACE_EXIT;
