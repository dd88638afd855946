// Package crashtest holds budgetd's end-to-end reliability tests: a real
// `budgetd serve` process behind a real OpenTelemetry Collector, killed with
// SIGKILL mid-load or cut off from its ClickHouse server, and the store
// checked afterwards for every span the Collector acknowledged; and the
// same scaled out (TestClusterReplicas): two replicas on a ClickHouse
// cluster behind the Collector's loadbalancing exporter. It has no
// non-test code; docs/reliability.md and docs/scale-out.md report its
// figures.
package crashtest
