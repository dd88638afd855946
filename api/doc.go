// Package api serves budgetd's REST API (gin, under /api/v1) for dashboards,
// the Prometheus /metrics endpoint for alerting, and the health probes.
//
// Every handler reads from the store with a deadline: the request's
// `timeout` parameter capped by the server's api.max_timeout, derived from
// the request's own context so a client that disconnects cancels its store
// query. Errors leave through one mapper (errors.go) as
// {"error":{"code":…,"message":…}} with a status from a closed set. The API
// is described in openapi.yaml, served at /api/v1/openapi.yaml; the tests
// check it against the router and the handlers' structs, lint it with
// Redocly CLI's recommended rules, and call the server through the Go client
// generated from it (package apiclient).
package api
