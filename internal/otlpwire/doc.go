// Package otlpwire reads and writes OTLP trace requests at the protobuf wire
// level, without decoding spans: it indexes where each ResourceSpans,
// ScopeSpans and span record lies in an encoded request (Index), assembles
// the encoding of any subset of its spans by copying records (a per-trace
// fragment, or a per-endpoint request for a router), and joins encoded
// fragments back into one request with one ResourceSpans per distinct
// resource and one ScopeSpans per distinct scope (Merger).
//
// It owns only byte ranges and field numbers. It must not know sampling,
// buffering, pdata's in-memory model beyond marshaling a request once, or
// who consumes the bytes: the tail sampler and the gateway's trace-ID router
// both build on it.
package otlpwire
