// Package store defines budgetd's storage contract: the Store interface that
// ingest writes spans through, the analyzer writes hops and findings through,
// and the API reads from.
//
// There are two engines, both real ClickHouse and both running the same DDL
// and SQL (package store/chsql): store/embedded (chDB in-process, the
// default) and store/clickhouse (a ClickHouse server or cluster). Package
// store/storetest is the conformance suite every engine passes.
package store
