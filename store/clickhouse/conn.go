package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/budgetd/budgetd/store"
	"github.com/budgetd/budgetd/store/chschema"
	"github.com/budgetd/budgetd/store/chsql"
)

// Config selects the server and database.
type Config struct {
	// DSN is clickhouse://[user[:password]@]host:port[/database][?options];
	// the database in the path is where budgetd's tables live (default budgetd).
	DSN         string        `yaml:"dsn"`
	TTLDays     int           `yaml:"-"`            // set from store.retention_days
	DialTimeout time.Duration `yaml:"dial_timeout"` // default 5s
	MaxConns    int           `yaml:"max_conns"`    // default 8
	// Cluster names a cluster of the server's remote_servers: budgetd then
	// creates its schema ON CLUSTER as replicated local tables under
	// Distributed ones sharded by trace id, and writes and reads through
	// the Distributed tables (docs/scale-out.md). Empty: one server.
	Cluster string `yaml:"cluster"`
}

// DefaultConfig returns the defaults for a local server.
func DefaultConfig() Config {
	return Config{DSN: "clickhouse://127.0.0.1:9000/budgetd", DialTimeout: 5 * time.Second, MaxConns: 8}
}

// Open connects to the server and opens the store on it, applying migrations.
func Open(ctx context.Context, cfg Config) (*chsql.Store, error) {
	c, database, err := Connect(cfg)
	if err != nil {
		return nil, err
	}
	s, err := chsql.Open(ctx, c, chsql.Config{Database: database, TTLDays: cfg.TTLDays, Cluster: cfg.Cluster})
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return s, nil
}

// Conn is a chsql.Conn on a connection pool to one server.
type Conn struct {
	db driver.Conn
}

var _ chsql.Conn = (*Conn)(nil)

// Connect parses cfg.DSN and returns a connection pool and the database name.
// It does not dial: the first query does, so budgetd starts while the server
// is still coming up.
func Connect(cfg Config) (*Conn, string, error) {
	u, err := url.Parse(cfg.DSN)
	if err != nil || u.Scheme != "clickhouse" || u.Host == "" {
		return nil, "", fmt.Errorf("parse store.clickhouse.dsn %q: want clickhouse://host:port/database", redact(cfg.DSN))
	}
	database := strings.Trim(u.Path, "/")
	if database == "" {
		database = "budgetd"
	}
	if !chschema.ValidIdentifier(database) {
		return nil, "", fmt.Errorf("parse store.clickhouse.dsn: database %q is not a plain identifier", database)
	}
	// The pool connects to the server's default database: budgetd's own may
	// not exist yet, and every statement names it explicitly.
	u.Path = ""
	opts, err := ch.ParseDSN(u.String())
	if err != nil {
		return nil, "", fmt.Errorf("parse store.clickhouse.dsn: %w", err)
	}
	opts.DialTimeout = cfg.DialTimeout
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 5 * time.Second
	}
	opts.MaxOpenConns = cfg.MaxConns
	if opts.MaxOpenConns <= 0 {
		opts.MaxOpenConns = 8
	}
	opts.MaxIdleConns = opts.MaxOpenConns
	if cfg.Cluster != "" {
		if !chschema.ValidIdentifier(cfg.Cluster) {
			return nil, "", fmt.Errorf("parse store.clickhouse.cluster: %q is not a plain identifier", cfg.Cluster)
		}
		if opts.Settings == nil {
			opts.Settings = ch.Settings{}
		}
		maps.Copy(opts.Settings, clusterSettings)
	}
	db, err := ch.Open(opts)
	if err != nil {
		return nil, "", fmt.Errorf("open clickhouse: %w", err)
	}
	return &Conn{db: db}, database, nil
}

// clusterSettings are the session settings of a store on a cluster.
var clusterSettings = ch.Settings{
	// An INSERT into a Distributed table returns once every shard's
	// replica has stored its rows, not when they are queued on the host
	// that took the insert: an acknowledged write is on its shard, a
	// failed one is reported to the writer (which retries under the same
	// token), and a retried block reaches the same shard, whose replicated
	// table drops it as a duplicate. The setting's newer name is
	// distributed_foreground_insert; current servers keep this one as an
	// alias. (Only numeric settings can be sent to 18.16 by
	// clickhouse-go; string ones such as load_balancing belong in the
	// server's profile for budgetd's user: docs/scale-out.md.)
	"insert_distributed_sync": 1,
}

// redact hides a DSN's password in error messages.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Version implements chsql.Conn.
func (c *Conn) Version(ctx context.Context) (string, error) {
	var v string
	if err := c.db.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
		return "", classify(ctx, err)
	}
	return v, nil
}

// placeholder matches ClickHouse's {name:Type} query parameters.
var placeholder = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*):[^{}]+\}`)

// bind turns {name:Type} placeholders into clickhouse-go's @name and the
// params into named arguments. clickhouse-go then binds them itself,
// escaping each value for its type, on every server version — 18.16 has no
// server-side query parameters.
func bind(query string, params chsql.Params) (string, []any) {
	if len(params) == 0 {
		return query, nil
	}
	args := make([]any, len(params))
	for i, p := range params {
		args[i] = ch.Named(p.Name, p.Value)
	}
	return placeholder.ReplaceAllString(query, "@$1"), args
}

// Exec implements chsql.Conn.
func (c *Conn) Exec(ctx context.Context, query string, params chsql.Params) error {
	q, args := bind(query, params)
	return classify(ctx, c.db.Exec(ctx, q, args...))
}

// Query implements chsql.Conn.
func (c *Conn) Query(ctx context.Context, query string, params chsql.Params) (chsql.Rows, error) {
	q, args := bind(query, params)
	rows, err := c.db.Query(ctx, q, args...)
	if err != nil {
		return nil, classify(ctx, err)
	}
	return &ctxRows{Rows: rows, ctx: ctx}, nil
}

// ctxRows classifies errors met while reading rows the same way as errors
// from starting the query.
type ctxRows struct {
	driver.Rows
	ctx context.Context //nolint:containedctx // lives exactly as long as the query it belongs to
}

func (r *ctxRows) Err() error { return classify(r.ctx, r.Rows.Err()) }

// Insert implements chsql.Conn: one batch, its columns filled from each
// block's typed buffers in turn (the driver copies the values), sent once.
func (c *Conn) Insert(ctx context.Context, table string, next chsql.Blocks, dedupToken string) error {
	blk, err := next()
	if err != nil || blk == nil {
		return err
	}
	if dedupToken != "" {
		ctx = ch.Context(ctx, ch.WithSettings(ch.Settings{"insert_deduplication_token": dedupToken}))
	}
	batch, err := c.db.PrepareBatch(ctx, "INSERT INTO "+table+" ("+blk.ColumnList()+")")
	if err != nil {
		return classify(ctx, err)
	}
	for ; blk != nil; blk, err = next() {
		for i := range blk.Columns {
			if err := appendColumn(batch.Column(i), &blk.Columns[i]); err != nil {
				_ = batch.Abort()
				return fmt.Errorf("append column %s: %w", blk.Columns[i].Name, err)
			}
		}
	}
	if err != nil {
		_ = batch.Abort()
		return err
	}
	return classify(ctx, batch.Send())
}

// appendColumn appends a block's column to the batch's from its typed
// buffers, in the form clickhouse-go takes without boxing every value: a
// scalar column's buffer whole (pointers into the values for a Nullable;
// clickhouse-go converts String into LowCardinality(String) itself), an
// array column a row at a time, each row a sub-slice of the flat values
// (nothing is copied). Arrays go row by row because clickhouse-go's
// column-wise Append of a [][]T walks it by reflection, allocating for
// every element, uint8s included, where its row Append of a []T takes a
// typed path: a 5,000-span WriteSpans made 435k allocations the one way,
// 330k the other.
func appendColumn(bc driver.BatchColumn, c *chsql.Column) error {
	switch c.Type {
	case chsql.TypeString:
		return bc.Append(c.Strings)
	case chsql.TypeInt8:
		return bc.Append(c.Int8s)
	case chsql.TypeUInt8:
		return bc.Append(c.UInt8s)
	case chsql.TypeUInt32:
		return bc.Append(c.UInt32s)
	case chsql.TypeUInt64:
		return bc.Append(c.UInt64s)
	case chsql.TypeInt32:
		return bc.Append(c.Int32s)
	case chsql.TypeInt64:
		return bc.Append(c.Int64s)
	case chsql.TypeFloat64:
		return bc.Append(c.Float64s)
	case chsql.TypeNullableFloat64:
		ptrs := make([]*float64, len(c.Float64s))
		for i := range c.Float64s {
			if c.Nulls[i] == 0 {
				ptrs[i] = &c.Float64s[i]
			}
		}
		return bc.Append(ptrs)
	case chsql.TypeArrayString:
		return appendRows(bc, c.Strings, c.Offsets)
	case chsql.TypeArrayUInt8:
		return appendRows(bc, c.UInt8s, c.Offsets)
	case chsql.TypeArrayUInt64:
		return appendRows(bc, c.UInt64s, c.Offsets)
	case chsql.TypeArrayFloat64:
		return appendRows(bc, c.Float64s, c.Offsets)
	case chsql.TypeArrayArrayString:
		return appendRows(bc, split(c.Strings, c.Inner), c.Offsets)
	case chsql.TypeArrayArrayUInt8:
		return appendRows(bc, split(c.UInt8s, c.Inner), c.Offsets)
	}
	return fmt.Errorf("no clickhouse-go values for type %s", c.Type)
}

// appendRows appends one array per row: values cut at the cumulative end
// offsets.
func appendRows[T any](bc driver.BatchColumn, values []T, ends []uint64) error {
	start := uint64(0)
	for _, end := range ends {
		if err := bc.AppendRow(values[start:end:end]); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// split cuts values into consecutive arrays at the cumulative end offsets,
// each capped at its end so that nothing appended to one overwrites the next.
func split[T any](values []T, ends []uint64) [][]T {
	out := make([][]T, len(ends))
	start := uint64(0)
	for i, end := range ends {
		out[i] = values[start:end:end]
		start = end
	}
	return out
}

// Close implements chsql.Conn.
func (c *Conn) Close() error { return c.db.Close() }

// classify marks errors that mean "the server cannot be reached" with
// store.ErrUnavailable so callers can answer 503 and retry later.
//
// clickhouse-go turns a context deadline into a socket deadline, so a query
// that outlives its context usually fails with an i/o timeout a moment
// before the context itself reports expiry; such errors are reported as the
// context's, so callers can match context.DeadlineExceeded.
func classify(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 100*time.Millisecond {
			return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.As(err, &netErr), errors.Is(err, ch.ErrAcquireConnTimeout):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}
