// Package problems groups findings into problems: what an on-call SRE acts
// on (DESIGN §5b). A finding is evidence about one span of one trace; a
// problem is one thing to fix — a kind of misconfiguration on one caller →
// callee edge (or, for path-level kinds, on one path) — with its impact, its
// worst evidence, a trend, example traces, a lifecycle state and a suggested
// fix computed from the budgets its findings recorded.
//
// The package is pure: it reads findings (from the analyzer or the store),
// takes the time as an option and does no I/O. Fingerprint and Key.ID are
// the contract a store keeps with each finding: the id depends only on what
// the finding is about, never on its trace, the replica that found it, the
// order findings arrived in or when they were detected. docs/problems.md
// describes the rules for users.
package problems
