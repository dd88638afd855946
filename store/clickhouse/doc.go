// Package clickhouse is the production store engine: a ClickHouse server or
// cluster reached over the native protocol with clickhouse-go/v2. The same
// DDL and SQL as the embedded engine run here (package store/chsql); the
// version-gated extras switch on by the server's version, so the portable
// core also runs on old servers such as Debian bookworm's 18.16.
package clickhouse
