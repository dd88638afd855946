// Package chsql is the Store implementation shared by both ClickHouse engines:
// the migrations, every INSERT and every SELECT. An engine only supplies a
// Conn — a way to run one statement with bound parameters, read rows and
// insert a batch — so the embedded and server engines cannot drift apart in
// what they store or how they answer.
package chsql
