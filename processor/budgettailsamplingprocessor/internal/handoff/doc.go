// Package handoff keeps traces whole when the sampler tier's membership
// changes: it computes the gateways' hash ring from the addresses the
// sampler resolves, tells which sampler owns a trace, and moves what the
// sampler gives it (buffered traces, fragments, decisions) to their owners
// over OTLP/gRPC, with one bounded queue, batching, timeouts and retries per
// peer; it serves peers' handoffs and hands them to the sampler.
//
// It owns the ring view, the peers, the server and the record that rides in
// a resource attribute. It must not know the buffer or the policy: what to
// move and when is the Sampler's (Receive, Rebalance).
package handoff
