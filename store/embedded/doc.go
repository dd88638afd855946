// Package embedded is the default store engine: the real ClickHouse engine
// running inside the budgetd process through chDB (libchdb.so), with its data
// in a local directory. It needs no server; the library is installed by
// `make setup` and loaded when the engine is opened, so budgetd runs without it
// when another engine is configured.
//
// Inserts reach the engine as one block of ClickHouse's Native format in an
// anonymous in-memory file (native.go, Conn.Insert); query results come back
// as RowBinaryWithNamesAndTypes (rowbinary.go). Inserts have a connection
// to the one chDB server of their own, and reads take one of three others,
// since chDB runs one statement at a time on each (conn.go,
// engine).
package embedded
