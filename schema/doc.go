// Package schema is budgetd's vocabulary: the span model every other package
// speaks (Span, Trace), the rows budgetd derives from it (Hop, Finding) and
// the names of the budget attribute contract of docs/attributes.md.
//
// Reading the budget facts a span records is the analysis' job (package
// analyze/budgetread); the ClickHouse tables those rows are stored in live
// next to the store (package store/chschema).
//
// It depends on the standard library only, so the ingest, analyze and store
// packages can share it without pulling each other in.
package schema
