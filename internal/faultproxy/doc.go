// Package faultproxy is a TCP proxy for fault tests: it stands between a
// client and its server (Clearance and PostgreSQL) and, switched at run
// time, breaks the network between them the ways a network breaks.
//
// New listens on 127.0.0.1 (a free port) and forwards every connection to
// the target, one target connection per client connection, bytes in order.
// What it does with them is the Mode, which applies at once to every
// connection, live or new:
//
//   - Pass forwards, each chunk after the added latency of SetDelay.
//   - Stall forwards nothing and loses nothing: bytes wait (in the proxy and
//     in the kernel's buffers, so TCP flow control pushes back) until the
//     mode changes, then flow on intact. It is a partition that heals
//     before TCP gives up: requests hang, then complete late.
//   - Blackhole reads bytes in both directions and throws them away. A
//     connection that lost bytes can never be whole again, so when the mode
//     leaves Blackhole the proxy resets it (RST), as the peers would once
//     TCP timed out.
//   - Refuse resets every new connection as soon as it arrives (the proxy's
//     kernel accepted it, so the client sees a reset rather than a
//     refusal); live connections go on as in Pass. With Reset it makes the
//     target unreachable.
//
// Reset closes every live connection, and any still being set up, with an
// RST on both sides (SetLinger(0)), as a server that died or a middlebox
// that dropped its state would: the target sees its client vanish
// mid-conversation. Set(Refuse) then Reset leaves no connection that
// passes.
//
// Cut loses one side of a request. Each connection's client-to-server
// bytes are read by a Matcher (Options.Match; PostgresCommit finds
// PostgreSQL COMMITs), and the next n requests it matches are cut:
// LoseReply forwards the request whole, half-closes the target connection
// (so the target reads it, acts on it, then sees end of stream), drops
// everything the target answers and, once the target has closed its side,
// resets the client: the request has taken effect before the client can
// know anything (a target that never closes leaves the client waiting
// until Reset or Close). LoseRequest resets both sides before the request
// reaches the target. No reply byte sent after the request was forwarded
// ever reaches the client.
//
// The proxy never reorders, duplicates or alters bytes: what reaches a peer
// is a prefix of what the other peer sent. Stats counts what it did. All
// methods are safe for concurrent use. It is test support: it does not
// look at TLS, and its Matchers understand only what they say they do.
package faultproxy
