// Package crashtest holds budgetd's end-to-end reliability tests: a real
// `budgetd serve` process behind a real OpenTelemetry Collector, killed with
// SIGKILL mid-load or cut off from its ClickHouse server, and the store
// checked afterwards for every span the Collector acknowledged. It has no
// non-test code; docs/reliability.md reports its figures.
package crashtest
