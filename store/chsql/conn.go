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
	// Insert writes the blocks next returns into table (database.name)
	// as one INSERT, into their columns by name; every block has the
	// same columns, each holding the block's Rows values of its Type. The
	// engine is done with a block before it asks for the next, so next
	// may refill one block, and it keeps none after returning. When
	// dedupToken is not empty the engine passes it as
	// insert_deduplication_token.
	Insert(ctx context.Context, table string, next Blocks, dedupToken string) error
	// Close releases the session.
	Close() error
}

// Blocks returns an insert's next block, or nil after the last. An INSERT
// of several blocks is still one insert: the server squashes its blocks
// into one part (up to min_insert_block_size_rows), and its dedup token
// covers them all.
type Blocks func() (*Block, error)

// OneBlock is the Blocks of an insert of blk alone.
func OneBlock(blk *Block) Blocks {
	done := false
	return func() (*Block, error) {
		if done {
			return nil, nil
		}
		done = true
		return blk, nil
	}
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
