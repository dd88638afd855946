// Package securitytest makes throw-away PKI for tests: a CA, a server
// certificate for the loopback names and client certificates, written as
// PEM files the way an operator would hand them to budgetd.
package securitytest
