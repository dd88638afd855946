// Package chschema is budgetd's ClickHouse tables: DDL, migrations and the
// version-gated features.
//
// The DDL is a numbered series of text/template files (sql/*.sql, embedded
// in the binary). Migrations renders them for one database and one server's
// Features (FeaturesFor maps a server version to what it supports), so both
// store engines, store/embedded and store/clickhouse, run the same DDL
// through package store/chsql. ValidIdentifier checks a database or table
// name before it is written into SQL unquoted.
package chschema
