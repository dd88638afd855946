// Package pipeline runs the streaming analysis of `budgetd serve`: it takes
// the spans ingest has made durable, assembles them into traces
// (analyze.Assembler), runs the detectors (analyze.Analyzer) when a trace is
// due, and writes the resulting hops and findings to the store.
//
// Analysis is best effort by design: the spans are already stored when they
// reach this package, so a failure here loses no data — it is counted and
// logged, and `budgetd analyze --from-store` can redo the work.
package pipeline
