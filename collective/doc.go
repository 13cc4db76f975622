// Package collective is Stoke's collective layer for data-parallel training: a
// rendezvous through PyTorch's c10d TCPStore protocol, then a ring of TCP
// connections over which AllReduce, AllReduceBF16, AllReduceFP16, Broadcast,
// Barrier and Agree run, in pure Go.
//
// # Rendezvous
//
// Init finds the other ranks through a c10d TCPStore at Config.Addr:Port:
// under torchrun (Config.UseAgentStore) the agent's store, which every rank
// joins as a client; otherwise rank 0 hosts the store (a torch TCPStore
// client can join it too) on Config.Addr's own address: loopback for
// 127.0.0.1, never every interface (Addr must then be an address of rank 0's
// machine). The store speaks torch 1.13's wire protocol
// (see collective/internal/tcpstore). Every key of an attempt starts with
// "stoke/attempt_<RestartCount>/", so a restarted group never reads a dead
// one's keys. Rank 0 first publishes the job's identity (Config.JobID:
// torchrun's run id, Slurm's job id, or one it generates); every other rank
// waits for it and, when it has an identity of its own that differs, fails
// naming both before it claims a place, so a rank of another job that finds
// this job's store does not join it. Rank 0 publishes a random group id; every rank listens on an
// ephemeral TCP port of the interface that reaches the store and publishes
// "host:port world-size nonce" under rank/<r> (a second claim of a rank is an
// error), then waits until all world-size ranks have published: a timeout
// says how many arrived and which are missing.
//
// # Ring protocol
//
// Rank r dials rank r+1 and accepts rank r-1. The dialler sends "STOKRING",
// the 16-byte group id, its rank, the world size (uint32 little-endian) and a
// 32-byte nonce; the acceptor checks the first four (a stray connection,
// another group's rank or another world size is refused) and answers the
// same with "STOKRACK" and its own nonce, followed by its proof; the dialler
// checks it and sends its own. A proof is HMAC-SHA256 keyed by Config.Secret
// over both messages, with a label per direction: a process without the
// secret cannot pass for a rank, in either direction. Each connection's
// handshake runs on its own goroutine, so a stray connection does not hold
// up the real one. Data flows one way, r to r+1.
//
// # Authentication
//
// With Config.Secret (STOKE_SECRET, the same on every rank) every connection
// to rank 0's store opens with an HMAC-SHA256 challenge-response in both
// directions and tags each query with a key of that session (see
// collective/internal/tcpstore): a process without the secret can neither
// read nor write a key. Under torchrun the store is the agent's, torch's and
// unauthenticated, so the ring handshake is where the secret is checked: a
// process that publishes itself as a rank there gets nothing from the others.
// The secret never crosses the wire. Rank 0's store bounds what a client
// can make it hold: 4 MiB a query, 64 MiB for all the queries being read at
// once, 2*WorldSize+64 connections, 256 MiB of keys and values. Without a secret rank 0 logs once
// (Config.Log) that the job is unauthenticated, as PyTorch's documentation
// warns for TCPStore; a torch TCPStore client can then join rank 0's store,
// and any process that reaches it can stop the job: a compare-set on a
// rank's key makes that rank's Init fail with ErrMismatch naming the claim,
// and the other ranks fail within Config.Timeout, at Init or at their first
// collective, without a result. Each collective starts with a 24-byte header
// (kind, op, sequence number, element count, root) that the receiver
// compares with its own: ranks that call different collectives, sizes, ops
// or roots fail with ErrMismatch instead of reducing garbage. Then the raw
// little-endian bytes of the buffer follow, with no framing: the schedule
// fixes every message's size.
//
// AllReduce is a ring reduce-scatter then all-gather, as Gloo's ring and
// NCCL do: the buffer is cut into world-size segments and each segment into
// chunks of 512 KiB; in step s rank r sends segment r-s and receives segment
// r-s-1, and a chunk is forwarded as soon as it is received and reduced, so
// sending, receiving and adding overlap (several chunks in flight). A
// sender goroutine owns writes to the next rank; the caller's goroutine
// reads and reduces (float32 with an AVX2 kernel on amd64, the Go loop under
// the noasm tag or elsewhere: the same IEEE additions, the same bits). TCP
// connections run with TCP_NODELAY and 4 MiB socket buffers, and float32 data
// crosses as the buffer's own bytes (no per-element encoding). Broadcast pipelines the same chunks from the root
// round the ring; Barrier and Agree are small all-gathers.
//
// # Determinism
//
// Segment k is added in one fixed order, rank k's value first then k+1's
// and so on round the ring, whatever the timing; the rank that completes a
// segment divides it once for Avg and the all-gather copies its bits, so
// every rank holds identical bits, and the same bits from run to run.
// bfloat16 and fp16 are added in float32 and rounded to the 16-bit format
// (nearest even; fp16 overflows to ±Inf past 65504) once per hop; the wire
// carries 16 bits.
//
// # Timeouts and failures
//
// Config.Timeout (default 30 minutes, PyTorch's) bounds the whole
// rendezvous (connecting to the store, waiting for every rank, connecting the
// ring; one store reply is also bounded by 10 s, so a server that accepts and
// never answers fails sooner) and each collective, from its start: a peer that hangs makes its neighbours
// fail with ErrTimeout after it, naming the rank waited for. A peer that dies
// or closes fails its neighbours at once with ErrPeer. Cancelling a
// collective's ctx ends it promptly; it closes this rank's connections, so
// the other ranks fail with ErrPeer too. A Group that failed stays failed:
// later collectives return the first error; Close it and Init a new one.
// When rank 0 gives up during the rendezvous it publishes its cause in the
// store (and, hosting it, keeps it open up to a second for the others to
// read it): the ranks still waiting fail at once with "rank 0 gave up:" and
// that cause, wrapping its sentinel. A store that rank 0 hosted and that
// closes without a cause is named as such (rank 0 exited or was killed).
//
// # CUDA
//
// This package moves host memory over TCP. On GPUs the route is NCCL (the
// collectives on device buffers, over NVLink and InfiniBand): package
// collective/nccl (cuda tag), whose communicator takes a Group for the exchange of
// NCCL's unique id and all-reduces on the stream that produced the gradients.
//
// # Concurrency
//
// A Group's collectives are serialised on one mutex: calls from several
// goroutines run one at a time in the order they take it, and every rank must
// issue the same collectives in the same order (the trainer calls AllReduce
// from one communication goroutine, in bucket order). Close may be called
// from any goroutine, during a collective too (which then fails). Each Group
// of more than one rank runs one goroutine, the sender, that Close joins; rank
// 0's store runs its accept loop and one goroutine per connection, joined by
// Close too. Init joins the goroutine that accepts the ring connection before
// it returns.
//
// # Ownership
//
// A collective reads and writes the caller's buffer only until it returns;
// the buffer is the caller's before and after. The Group owns its two
// connections, a 128 KiB scratch buffer that steady-state all-reduces reuse
// (they allocate nothing), and rank 0's store.
package collective
