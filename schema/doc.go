// Package schema is budgetd's vocabulary: the span model every other package
// speaks (Span, Trace), the rows budgetd derives from it (Hop, Finding), the
// budget attribute contract of docs/attributes.md, and the ClickHouse DDL as
// embedded migrations.
//
// It depends on the standard library only, so the ingest, analyze and store
// packages can share it without pulling each other in.
package schema
