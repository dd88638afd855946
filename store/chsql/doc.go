// Package chsql is the Store implementation shared by both ClickHouse engines:
// the migrations, every INSERT and every SELECT. An engine only supplies a
// Conn — a way to run one statement with bound parameters, read rows and
// insert a Block — so the embedded and server engines cannot drift apart in
// what they store or how they answer.
//
// The columns budgetd inserts are stated once, in tables.go: for each table
// every column's name, its type as the DDL declares it and how a row puts
// its value. Inserts fill a Block (block.go), a batch held column by column
// in typed buffers, from those definitions; the conformance suite checks
// them against the tables the migrations create.
package chsql
