// Package jaegerapi reads traces from a running Jaeger's query service over
// its api_v3 HTTP API (GET /api/v3/services and /api/v3/traces on the UI's
// port, 16686 by default), which answers in OTLP/JSON, for `budgetd analyze
// --from-jaeger`.
//
// api_v3's FindTraces has no cursor: it returns at most query.num_traces
// traces of one service whose spans start in a time window. Read pages by
// splitting a window that came back full into halves, down to a minimum
// width, de-duplicates traces by id (a trace is found once per service it
// crosses, and in both halves when it straddles them), and stops at a
// number of spans. The answers are decoded and converted by package ingest,
// as trace files are, so limits and rejected spans count the same.
package jaegerapi
