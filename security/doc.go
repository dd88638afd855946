// Package security holds what budgetd's listeners share to control access:
// bearer tokens (read from a file or an environment variable, compared in
// constant time, several at once so they can be rotated) and TLS server
// settings (TLS 1.2 or later, optionally requiring client certificates).
// ingest and api each configure their own, so the OTLP senders and the
// API's readers can hold different credentials.
package security
