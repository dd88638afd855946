// Package budget makes Go services spend one end-to-end deadline instead of
// a chain of independent timeouts: it is the fix for what budgetd finds.
//
// A request gets its deadline once, at the edge. Every hop reads what is left
// of it, refuses work that cannot finish in time, bounds each downstream call
// by what remains minus a margin for its own response, and sends the smaller
// figure on. Retries are paid from the same budget, and cancellation reaches
// the work when the deadline passes or the caller goes away. Along the way
// the package records the budget attributes of docs/attributes.md on the
// spans the OpenTelemetry instrumentation already creates, so budgetd can
// check that the chain really behaves that way.
//
// # Pieces
//
//   - Server (built with NewServer from a ServerConfig) reads the incoming
//     budget: Server.Middleware for net/http, Server.UnaryServerInterceptor
//     for gRPC.
//   - Transport is an http.RoundTripper that bounds each outgoing request and
//     sends the x-request-timeout-ms header.
//   - GRPCClient.UnaryClientInterceptor does the same for gRPC calls, whose
//     deadline grpc-go already sends as grpc-timeout; ClientStatsHandler puts
//     its figures on the CLIENT span otelgrpc creates.
//   - Retry runs a call again only when the remaining budget can pay for the
//     wait and for an attempt that can finish.
//
// # Wiring with OpenTelemetry
//
// The package never starts spans; it adds attributes to the current span
// (trace.SpanFromContext). So the instrumentation must run outside it:
//
//	otelhttp.NewHandler(srv.Middleware(mux), "checkout")   // SERVER span first
//	otelhttp.NewTransport(&budget.Transport{...})           // CLIENT span first
//	grpc.StatsHandler(otelgrpc.NewServerHandler())          // SERVER span before interceptors
//	grpc.WithStatsHandler(budget.ClientStatsHandler(otelgrpc.NewClientHandler()))
//
// Wrapped the other way round, the figures land on the caller's span instead
// of the CLIENT span, and budgetd cannot see them where it looks.
//
// # Dependencies
//
// The package is a library for other modules: it imports the standard
// library, the OpenTelemetry API and grpc-go only, never other budgetd
// packages. Its attribute and header names therefore mirror docs/attributes.md
// rather than importing budgetd's schema package.
package budget
