package embedded

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/budgetd/budgetd/store/chsql"
)

// Config selects the embedded engine's data directory and database.
type Config struct {
	DataDir  string `yaml:"data_dir"` // default ./data
	Database string `yaml:"database"` // default budgetd
	TTLDays  int    `yaml:"-"`        // set from store.retention_days
}

// DefaultConfig returns the embedded engine's defaults.
func DefaultConfig() Config {
	return Config{DataDir: "./data", Database: "budgetd"}
}

// Open starts (or joins) the process's chDB engine on cfg.DataDir and opens
// the store on it, applying migrations.
func Open(ctx context.Context, cfg Config) (*chsql.Store, error) {
	c, err := Connect(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s, err := chsql.Open(ctx, c, chsql.Config{Database: cfg.Database, TTLDays: cfg.TTLDays})
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	// Once the engine has started and migrated: what start-up ran and
	// serving does not, it need not keep in memory. Best effort: a
	// failure leaves the pages where they were.
	startupPages.Do(func() { _, _ = releaseStartupPages(libraryState.path) })
	return s, nil
}

// startupPages releases chDB's start-up pages once a process.
var startupPages sync.Once

// engine is the process's single chDB instance. chDB runs one embedded server
// per process, bound to one data directory, so every Conn shares it; the last
// Close shuts it down.
//
// It has several connections (sessions) to that server: chDB runs one
// statement at a time on a connection, and with one, every insert of the
// write path waited behind whatever read the API was running (an insert of
// ten rows took 3 s behind a 3 s read). Inserts take one of
// insertConnections; reads, DDL and the rest take one of readConnections,
// so a read waits only when that many are running: the problems list's
// three reads run side by side, and a trace opened while the list loads
// does not queue behind it.
var engine struct {
	mu      sync.Mutex
	conn    *connection      // the first connection, which started the server
	readers chan *connection // readConnections of them, conn among them
	writers chan *connection // insertConnections of them
	dir     string
	refs    int
}

// readConnections is how many reads and statements the embedded engine
// runs at once; more wait for one of them to end.
const readConnections = 3

// insertConnections is how many inserts the embedded engine runs at once.
// Two: the write path has two writers, the drainer (spans and their
// trace-id lookup) and the analysis pipeline (hops, statistics, findings),
// and with one connection each waited for the other's inserts, which under
// load kept that connection busy all the time (docs/performance.md, step
// 54).
const insertConnections = 2

// Conn is a chsql.Conn on the process's chDB engine.
type Conn struct {
	readers chan *connection // reads and statements: take one, put it back
	writers chan *connection // inserts: take one, put it back
	closed  bool
	mu      sync.Mutex
	// calls counts the calls running in chDB, including those whose
	// callers gave up on them (runCall): Close waits for them.
	calls sync.WaitGroup
}

// errClosed is the error of a call on a closed Conn.
var errClosed = errors.New("chdb: connection closed")

var _ chsql.Conn = (*Conn)(nil)

// Connect returns a Conn on the chDB engine for dataDir, starting the engine
// if this is the first Conn. A second, different dataDir in the same process
// is refused: chDB cannot run two.
func Connect(dataDir string) (*Conn, error) {
	lib, err := loadLibrary()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("open chdb: %w", err)
	}
	engine.mu.Lock()
	defer engine.mu.Unlock()
	if engine.conn != nil {
		if engine.dir != abs {
			return nil, fmt.Errorf("open chdb at %s: this process already runs chdb at %s", abs, engine.dir)
		}
		engine.refs++
		return &Conn{readers: engine.readers, writers: engine.writers}, nil
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("open chdb: %w", err)
	}
	c, err := openConnection(lib, abs)
	if err != nil {
		return nil, err
	}
	// Further sessions on the server c started: the first
	// insertConnections of them take the inserts, c and the rest the
	// reads.
	others := make([]*connection, 0, insertConnections+readConnections-1)
	for range insertConnections + readConnections - 1 {
		o, err := openConnection(lib, abs)
		if err != nil {
			for _, o := range others {
				o.close()
			}
			c.close()
			return nil, err
		}
		others = append(others, o)
	}
	writers := make(chan *connection, insertConnections)
	for _, o := range others[:insertConnections] {
		writers <- o
	}
	readers := make(chan *connection, readConnections)
	readers <- c
	for _, o := range others[insertConnections:] {
		readers <- o
	}
	engine.conn, engine.readers, engine.writers, engine.dir, engine.refs = c, readers, writers, abs, 1
	return &Conn{readers: readers, writers: writers}, nil
}

// Close implements chsql.Conn.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	// A call whose caller gave up is still running in chDB; shutting the
	// engine down under it crashes the process. Queries are bounded by
	// their max_execution_time, inserts by their block.
	c.calls.Wait()
	engine.mu.Lock()
	defer engine.mu.Unlock()
	engine.refs--
	if engine.refs == 0 {
		// Every call has ended (calls.Wait above, for every Conn), so
		// every connection is back in its channel.
		for range readConnections {
			if r := <-engine.readers; r != engine.conn {
				r.close()
			}
		}
		for range insertConnections {
			(<-engine.writers).close()
		}
		engine.conn.close() // the last connection shuts the server down
		engine.conn, engine.readers, engine.writers, engine.dir = nil, nil, nil, ""
	}
	return nil
}

// run executes one query off the caller's goroutine so that the caller gets
// its context error promptly: chDB's C call cannot be interrupted, so a query
// that outlives its caller finishes in the background (queries carry
// max_execution_time from the deadline, which bounds that).
func (c *Conn) run(ctx context.Context, query, format string, params chsql.Params) ([]byte, error) {
	names, values, err := bindParams(params)
	if err != nil {
		return nil, err
	}
	return c.runCall(ctx, func() ([]byte, error) {
		r := <-c.readers
		defer func() { c.readers <- r }()
		if err := ctx.Err(); err != nil {
			return nil, err // the caller left while the call waited for a connection
		}
		return r.query(query, format, names, values)
	}, nil)
}

// runCall runs call on its own goroutine and waits for it or for ctx. When
// ctx is done already, or the Conn is closed (errClosed), it does not run
// call and runs skipped instead, when set, to release what call would have.
func (c *Conn) runCall(ctx context.Context, call func() ([]byte, error), skipped func()) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		if skipped != nil {
			skipped()
		}
		return nil, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		if skipped != nil {
			skipped()
		}
		return nil, errClosed
	}
	c.calls.Add(1)
	c.mu.Unlock()
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer c.calls.Done()
		out, err := call()
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Version implements chsql.Conn.
func (c *Conn) Version(ctx context.Context) (string, error) {
	out, err := c.run(ctx, "SELECT version()", "TabSeparated", nil)
	if err != nil {
		return "", fmt.Errorf("read chdb version: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Exec implements chsql.Conn.
func (c *Conn) Exec(ctx context.Context, query string, params chsql.Params) error {
	_, err := c.run(ctx, query, "TabSeparated", params)
	return err
}

// Query implements chsql.Conn. Results are read whole as
// RowBinaryWithNamesAndTypes (rowbinary.go).
func (c *Conn) Query(ctx context.Context, query string, params chsql.Params) (chsql.Rows, error) {
	if dl, ok := ctx.Deadline(); ok {
		left := max(time.Until(dl).Seconds(), 0.001)
		query += " SETTINGS max_execution_time = " + strconv.FormatFloat(math.Ceil(left*1000)/1000, 'f', -1, 64)
	}
	out, err := c.run(ctx, query, "RowBinaryWithNamesAndTypes", params)
	if err != nil {
		return nil, err
	}
	return newBinaryRows(out), nil
}

// Insert implements chsql.Conn. The blocks are written in the engine's
// Native format, one after another, into an anonymous in-memory file
// (memfd), which the statement reads FROM INFILE. Binary data cannot
// travel inline in the statement the way text formats can: the engine
// stops reading inline data at its first NUL byte.
func (c *Conn) Insert(ctx context.Context, table string, next chsql.Blocks, dedupToken string) error {
	blk, err := next()
	if err != nil || blk == nil {
		return err
	}
	f, err := memFile("budgetd-insert-" + table)
	if err != nil {
		return fmt.Errorf("insert %s: %w", table, err)
	}
	columns := blk.ColumnList()
	// Encoded straight into the file a chunk at a time: the whole
	// encoding is only ever in the file.
	for ; blk != nil; blk, err = next() {
		if err = writeNative(f, blk, nativeChunkBytes); err != nil {
			break
		}
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("insert %s: write block: %w", table, err)
	}
	q := "INSERT INTO " + table + " (" + columns + ") FROM INFILE '/proc/self/fd/" + strconv.Itoa(int(f.Fd())) + "'"
	if dedupToken != "" {
		// The token is validated by chsql ([A-Za-z0-9_-]) before it gets here.
		q += " SETTINGS insert_deduplication_token = '" + dedupToken + "'"
	}
	q += " FORMAT Native"
	_, err = c.runCall(ctx, func() ([]byte, error) {
		// chDB reads the file until the call returns, which may be after
		// runCall gave up on a cancelled context: only then may it close.
		defer f.Close()
		w := <-c.writers
		defer func() { c.writers <- w }()
		if err := ctx.Err(); err != nil {
			// The caller left while the insert waited for a
			// connection, as a read does in run: nobody waits for it,
			// and the write path retries a batch under its token.
			return nil, err
		}
		return w.queryBytes([]byte(q), "TabSeparated")
	}, func() { f.Close() })
	return err
}

// memFile returns an anonymous file that lives in memory (memfd_create):
// nothing reaches a disk, and it is gone when closed.
func memFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create in-memory file: %w", err)
	}
	return os.NewFile(uintptr(fd), name), nil
}
