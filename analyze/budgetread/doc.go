// Package budgetread reads the budget facts a span's attributes, headers and
// events record: the budget.* attributes and budget.cancelled events of the
// contract in docs/attributes.md, the budget and attempt number inferred from
// request headers and metadata (x-request-timeout-ms, grpc-timeout,
// x-envoy-expected-rq-timeout-ms, x-request-deadline, retry counts) where
// the span does not record them, and whether its status says it timed out
// or was cancelled.
//
// Read returns those Facts for one span. The header grammars are exported
// for other readers: ParseGRPCTimeout and FormatGRPCTimeout (the gRPC HTTP/2
// TimeoutValue, read and written as grpc-go does), ParseMillis (strict
// decimal milliseconds) and HeaderValue (the first value of a header
// attribute). The grpc-timeout cases are shared with the budget library,
// budget/testdata/grpc_timeout_cases.json, so the two agree.
//
// Like package analyze, it is pure: no I/O, no clock, no state.
package budgetread
