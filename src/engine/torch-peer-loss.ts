/**
 * torch.distributed's words for a peer lost: what a rank prints when another rank (or the link to
 * it) failed first. Engine-neutral: every engine whose ranks meet through torch (vLLM, SGLang)
 * reads a node whose cause is one of these as a lost peer's, so another node with a cause of its
 * own is blamed. Each pattern is led by a literal (the rule of ./vllm/log-shapes.ts).
 */
export const TORCH_PEER_LOSS: readonly RegExp[] = [
  // A rank that lost the process holding torch's TCPStore (the head): torch's recvBytes
  // (torch/csrc/distributed/c10d/Utils.hpp) "Failed to recv, got 0 bytes. Connection was likely
  // closed. Did the remote server shutdown or crash?", logged by TCPStore.cpp's "[c10d] recvValue
  // failed on SocketImpl(...)" and ProcessGroupNCCL's "Failed to check the \"should dump\" flag on
  // TCPStore"; what a headless worker prints when the head dies (vllm-project/vllm#32136, and a
  // Spark worker's log quoted in a public DGX Spark write-up), often again and again without exiting.
  /Connection was likely closed\. Did the remote server shutdown or crash\?/,
  // The same losses in other words: older torch's "failed to recv, got 0 bytes", and the c10d
  // socket's send or receive failing with "Broken pipe" / "Connection reset by peer".
  /failed to recv, got 0 bytes/i,
  // SocketImpl's own text (fd, addr, remote) has no parenthesis: torch/csrc/distributed/c10d/socket.cpp.
  /\[c10d\] (?:recvValue|recvBytes|sendBytes)\w* failed on SocketImpl\([^()]*\): (?:Broken pipe|Connection reset by peer)/,
  // NCCL's ncclRemoteError, as torch's ProcessGroupNCCL raises it in a rank whose collective lost a
  // peer: ncclGetErrorString (nccl src/init.cc) "remote process exited or there was a network
  // error", inside torch's "NCCL error in: <file>:<line>, remote process exited or there was a network
  // error, NCCL version …". A network error reads the same: either way a peer, or the link to it,
  // failed first.
  /remote process exited or there was a network error/,
  // Gloo's TCP pair whose peer went away (gloo/transport/tcp/pair.cc): "Connection closed by peer
  // [ADDR]:PORT", the CPU group's collectives (SGLang's barriers run on it).
  /Connection closed by peer/,
];
