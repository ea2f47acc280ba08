import { WRITE_ALL_PERL } from "./perl-snippets.js";

/**
 * `docker save` and `docker load` on a node without the docker CLI in the byte path: a perl
 * program streams the archive straight from and to the Docker daemon's API socket.
 *
 * Why: on the way node to node every byte of an image already passes a hop (perl); the CLI added a
 * process that copies it once more, into and out of its own HTTP client. Measured on the practice
 * cluster (4 hosts on one machine's 2 cores, 300 MiB image, 3 targets; bench/push.ts), the CLIs
 * took 2.6 s of CPU of a push's 18 s, and without them a push went from 9.8-11.4 s to 8.8-8.9 s
 * node to node and from 14.8-18.1 s to 14.1-14.2 s relayed (two runs). On a Spark the cores are many, but so are the bytes (a vLLM
 * image is 20-30 GB).
 *
 * Where the CLI would talk to the daemon is asked of the CLI itself (`docker context inspect`:
 * DOCKER_HOST, DOCKER_CONTEXT or the current context; docker/cli cli/command/cli.go
 * resolveContextName). Only a local socket (`unix:///...`) is spoken to directly, and only where
 * perl runs and the socket takes the connection; anything else (tcp://, ssh://, a CLI without
 * contexts, a `docker` that wraps sudo) runs `docker save`/`docker load` as before, so the CLI's
 * own TLS, SSH and wrappers still apply there.
 *
 * The API, as moby serves it (api/server/router/image/image_routes.go):
 * - GET /images/get?names=NAME: the archive, as `docker save` writes it. Asked as HTTP/1.0 so that
 *   the body comes unframed and ends with the connection (Go's net/http server.go: "HTTP version
 *   < 1.1: cannot do chunked transfer encoding ... signal EOF by closing connection"). A failure
 *   before the first byte is a status with a JSON `message`; one after it is written into the
 *   stream (FormatError). Unframed, a dropped connection would look like the end: the archive
 *   counts as whole only when it ends as a tar does (two zero blocks), else the save fails, with
 *   the daemon's message where it wrote one.
 * - POST /images/load?quiet=1: the archive as the request body (chunked: its length is not known
 *   before the end), answered with one JSON message per line, `{"stream":"Loaded image: NAME\n"}`
 *   for each name, or an `error`/`errorDetail` one, always under status 200 (the handler writes
 *   its error into the stream). The program prints the `stream` texts as `docker load --quiet`
 *   does and fails with the error's message, so the script around it (LOAD_ONLY_SCRIPT) reads the
 *   same lines from either.
 * perl-base, the perl every node has, ships no HTTP client or JSON module (HTTP::Tiny and JSON::PP
 * are in Debian's perl-modules): the program reads only those framings and shapes, and anything
 * else fails the transfer rather than passing as loaded (the push checks every node's image ID
 * after it, too).
 */
export const DOCKER_API_PERL = String.raw`
use strict; use warnings; use IO::Socket::UNIX; use Socket ();
$SIG{PIPE} = 'IGNORE';
my ($path, $mode, $name) = @ARGV;
sub fail { print STDERR "@_\n"; exit 1; }
# Nothing read or written yet: the caller may hand the work to the docker CLI instead (DOCKER_API_SH).
my $s = IO::Socket::UNIX->new(Type => Socket::SOCK_STREAM(), Peer => $path) or exit 125;
binmode $s; binmode STDIN; binmode STDOUT;
${WRITE_ALL_PERL}
# The answer's status and headers, and what was read past them (the body's start).
sub head {
  my $h = '';
  while (index($h, "\r\n\r\n") < 0) {
    fail("the Docker daemon sent no answer") unless sysread($s, $h, 65536, length $h);
    fail("the Docker daemon's answer has no end of headers") if length($h) > 1 << 20;
  }
  my $i = index($h, "\r\n\r\n");
  my ($status) = $h =~ m{^HTTP/1\.[01] (\d{3}) };
  return ($status // 0, substr($h, 0, $i), substr($h, $i + 4));
}
sub rest { my $b = $_[0]; 1 while sysread($s, $b, 65536, length $b); return $b; }
my %esc = (n => "\n", t => "\t", r => "\r", b => "\b", f => "\f");
sub unjson {
  my $t = shift;
  $t =~ s{\\(?:u([0-9a-fA-F]{4})|(.))}{defined $1 ? do { my $c = chr(hex $1); utf8::encode($c); $c } : ($esc{$2} // $2)}ge;
  return $t;
}
# A JSON message's text: errorDetail's or the error's message, else the text itself.
sub said { my ($m) = $_[0] =~ /"(?:message|error)":"((?:[^"\\]|\\.)*)"/; return defined $m ? unjson($m) : $_[0]; }
if ($mode eq 'save') {
  (my $q = $name) =~ s/([^A-Za-z0-9._~-])/sprintf('%%%02X', ord $1)/ge;
  write_all($s, "GET /images/get?names=$q HTTP/1.0\r\nHost: docker\r\n\r\n") or fail("cannot ask the Docker daemon: $!");
  my ($status, $headers, $d) = head();
  fail("Error response from daemon: " . said(rest($d))) unless $status == 200;
  fail("the Docker daemon framed the archive (Transfer-Encoding), which an HTTP/1.0 answer never is") if $headers =~ /^transfer-encoding:/mi;
  # Unframed, the archive's end and a connection that dropped look alike; a whole tar ends with
  # two zero blocks (POSIX ustar; Go's archive/tar Writer.Close writes them), and an error after
  # the first byte comes as a JSON message instead (image_routes.go, FormatError).
  my $tail = '';
  while (1) {
    write_all(\*STDOUT, $d) or fail("writing the archive: $!");
    $tail = substr($tail . $d, -1024);
    my $n = sysread($s, $d, 1 << 20);
    fail("reading the archive from the Docker daemon: $!") unless defined $n;
    last unless $n;
  }
  exit 0 if $tail eq "\0" x 1024;
  fail($tail =~ /(\{"errorDetail".*\})/s ? "Error response from daemon: " . said($1) : "the archive from the Docker daemon ended before its end");
}
if ($mode ne 'load') { print STDERR "unknown mode $mode\n"; exit 2; }
write_all($s, "POST /images/load?quiet=1 HTTP/1.1\r\nHost: docker\r\nContent-Type: application/x-tar\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
  or fail("cannot ask the Docker daemon: $!");
# A daemon that stops reading (its disk full) has answered why: the answer below says it.
my ($d, $whole) = ('', 1);
while (1) {
  my $n = sysread(STDIN, $d, 1 << 20);
  fail("reading the archive: $!") unless defined $n;
  if (!$n) { $whole = write_all($s, "0\r\n\r\n"); last; }
  unless (write_all($s, sprintf("%x\r\n", $n)) && write_all($s, $d) && write_all($s, "\r\n")) { $whole = 0; last; }
}
my ($status, $headers, $body) = head();
$body = rest($body);
my $ended = 1;
if ($headers =~ /^transfer-encoding:\s*chunked/mi) {
  # Chunks (RFC 9112 7.1): a hex size (with any extension after ';'), the data, CRLF; the last has size 0.
  my ($o, $out) = (0, '');
  $ended = 0;
  while ((my $e = index($body, "\r\n", $o)) >= 0) {
    my ($hex) = substr($body, $o, $e - $o) =~ /^([0-9a-fA-F]+)/ or last;
    my $n = hex $hex;
    if (!$n) { $ended = 1; last; }
    last if $e + 2 + $n > length $body;
    $out .= substr($body, $e + 2, $n); $o = $e + 2 + $n + 2;
  }
  $body = $out;
}
fail("Error response from daemon: " . said($body)) unless $status == 200;
my ($err, $said) = (undef, '');
for my $line (split /\r?\n/, $body) {
  next if $line eq '';
  if ($line =~ /^\{"stream":"((?:[^"\\]|\\.)*)"\}$/) { $said .= unjson($1); }
  elsif ($line =~ /"error(?:Detail)?":/) { $err //= said($line); }
  else { print STDERR "$line\n"; }
}
# What the daemon said it loaded counts only with an answer that is whole and no error in it.
fail($said . ($err // "the Docker daemon's answer ended before its end")) if defined $err || !$ended;
fail($said . "the Docker daemon stopped reading the archive before its end") unless $whole;
print $said;
exit 0;
`;

/**
 * A shell function, `docker_api save IMAGE` (the archive on stdout) and `docker_api load` (the
 * archive on stdin, `docker load --quiet`'s lines on stdout), for a script that holds
 * DOCKER_API_PERL in $api: straight to the daemon's socket where it may be, else the docker CLI.
 */
const DOCKER_API_SH = `docker_api() {
  docker_api_host=$(docker context inspect --format '{{.Endpoints.docker.Host}}' </dev/null 2>/dev/null) || docker_api_host=
  case $docker_api_host in
    unix:///*) if command -v perl >/dev/null 2>&1; then
        perl -e "$api" -- "\${docker_api_host#unix://}" "$@"
        docker_api_status=$?
        # 125: the socket would not take a connection (a docker that is a wrapper, a sudo script):
        # nothing was read, so the CLI can do it all.
        [ "$docker_api_status" -ne 125 ] && return "$docker_api_status"
      fi ;;
  esac
  case $1 in
    save) docker save -- "$2" ;;
    load) docker load --quiet ;;
    *) echo "docker_api: unknown mode $1" >&2; return 2 ;;
  esac
}`;

/**
 * The argv of a script that may call `docker_api` (DOCKER_API_SH): `body` runs under `shell` with
 * `args` as its $1, $2, ... (the program itself goes in ahead of them and is shifted off).
 */
export function withDockerApi(shell: "sh" | "bash", body: string, args: readonly string[]): string[] {
  return [shell, "-c", `api=$1; shift\n${DOCKER_API_SH}\n${body}`, shell, DOCKER_API_PERL, ...args];
}

/** What writes `image`'s archive on a node, as `docker save` does. */
export const dockerSave = (image: string): string[] => withDockerApi("sh", 'docker_api save "$1"', [image]);
