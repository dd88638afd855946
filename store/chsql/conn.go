package chsql

import (
	"context"
)

// Conn is what an engine provides: one ClickHouse session that may be used by
// several goroutines at once.
//
// Queries use ClickHouse's {name:Type} placeholders; Params supplies their
// values, which the engine binds outside the SQL text (server-side where the
// engine supports it, otherwise through the driver's own escaping binder) —
// never by concatenation here.
type Conn interface {
	// Version returns the server version, e.g. "18.16.1" or "26.7.2.1".
	Version(ctx context.Context) (string, error)
	// Exec runs a statement that returns no rows.
	Exec(ctx context.Context, query string, params Params) error
	// Query runs a SELECT. The caller closes the Rows.
	Query(ctx context.Context, query string, params Params) (Rows, error)
	// Insert writes blk into table (database.name) as one block, into
	// blk's columns by name. Every column of blk holds blk.Rows values of
	// its Type; the engine reads blk and must not keep it after returning.
	// When dedupToken is not empty the engine passes it as
	// insert_deduplication_token.
	Insert(ctx context.Context, table string, blk *Block, dedupToken string) error
	// Close releases the session.
	Close() error
}

// Rows iterates over a query result. Scan supports *string, *uint64, *int64,
// *uint32, *uint8, *int8, *float64, **float64 (Nullable), *[]string,
// *[]uint64, *[]uint8, *[]float64, *[][]string and *[][]uint8.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// Param is one bound query parameter.
type Param struct {
	Name  string
	Value any // string, uint64, int64, float64
}

// Params are a query's bound parameters.
type Params []Param

// P is shorthand for building a Param.
func P(name string, value any) Param { return Param{Name: name, Value: value} }
