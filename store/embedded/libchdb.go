package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// ErrNoLibrary is returned when libchdb.so cannot be loaded. The message names
// the setup command because that is the only thing a user can do about it.
var ErrNoLibrary = errors.New("libchdb.so not found: run `make setup` (or set CHDB_LIB_PATH to libchdb.so)")

// libchdb binds the subset of chDB's C API that budgetd uses.
//
// budgetd binds libchdb itself instead of importing chdb-go's packages because
// chdb-go loads the library in a package init() and panics when it is
// missing, which would crash every budgetd command — even `budgetd version` or
// a server configured for a remote ClickHouse. Loading lazily here, with the
// same purego mechanism chdb-go uses, turns a missing library into an error.
type libchdb struct {
	connect         func(argc int, argv []*byte) unsafe.Pointer
	closeConn       func(conn unsafe.Pointer)
	queryWithParams func(conn unsafe.Pointer, query, format string, names, values []*byte, count uintptr) unsafe.Pointer
	queryN          func(conn unsafe.Pointer, query *byte, queryLen uintptr, format string, formatLen uintptr) unsafe.Pointer
	destroyResult   func(res unsafe.Pointer)
	resultBuffer    func(res unsafe.Pointer) unsafe.Pointer
	resultLength    func(res unsafe.Pointer) uintptr
	resultError     func(res unsafe.Pointer) string
	// setSignalHandlersEnabled(0) keeps chDB from installing its own
	// crash-signal handlers (see keepGoSignalHandlers).
	setSignalHandlersEnabled func(enabled int32)
}

// libraryState is process-wide because the library is: dlopen returns the same
// handle every time and chDB runs one embedded server per process.
var libraryState struct {
	once sync.Once
	lib  *libchdb
	path string // the file lib was loaded from
	err  error
}

// libraryPath returns where libchdb.so is: CHDB_LIB_PATH when set, else the
// setup cache (.cache/libchdb, looked for in the working directory and its
// parents, so `go test` in a package directory finds it, and beside the
// executable's directory), else the system location chdb-go also uses.
func libraryPath() (string, error) {
	if p := os.Getenv("CHDB_LIB_PATH"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("CHDB_LIB_PATH=%s: %w (run `make setup`)", p, err)
		}
		return p, nil
	}
	const rel = ".cache/libchdb/libchdb.so"
	var candidates []string
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			candidates = append(candidates, filepath.Join(dir, rel))
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), "..", rel))
	}
	candidates = append(candidates, "/usr/local/lib/libchdb.so")
	for _, p := range candidates {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", ErrNoLibrary
}

// loadLibrary dlopens libchdb once per process.
func loadLibrary() (*libchdb, error) {
	s := &libraryState
	s.once.Do(func() {
		path, err := libraryPath()
		if err != nil {
			s.err = err
			return
		}
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			s.err = fmt.Errorf("load %s: %w (run `make setup`)", path, err)
			return
		}
		l := &libchdb{}
		purego.RegisterLibFunc(&l.connect, h, "chdb_connect")
		purego.RegisterLibFunc(&l.closeConn, h, "chdb_close_conn")
		purego.RegisterLibFunc(&l.queryWithParams, h, "chdb_query_with_params")
		purego.RegisterLibFunc(&l.queryN, h, "chdb_query_n")
		purego.RegisterLibFunc(&l.destroyResult, h, "chdb_destroy_query_result")
		purego.RegisterLibFunc(&l.resultBuffer, h, "chdb_result_buffer")
		purego.RegisterLibFunc(&l.resultLength, h, "chdb_result_length")
		purego.RegisterLibFunc(&l.resultError, h, "chdb_result_error")
		purego.RegisterLibFunc(&l.setSignalHandlersEnabled, h, "chdb_set_signal_handlers_enabled")
		s.lib, s.path = l, path
	})
	return s.lib, s.err
}

// cStrings converts Go strings to NUL-terminated C strings. The returned
// slice keeps the backing arrays alive for the duration of the call.
func cStrings(ss []string) []*byte {
	out := make([]*byte, len(ss))
	for i, s := range ss {
		b := make([]byte, len(s)+1)
		copy(b, s)
		out[i] = &b[0]
	}
	return out
}

// connection is one chdb_connection handle (a chdb_connection* in C).
type connection struct {
	lib  *libchdb
	conn unsafe.Pointer // chdb_connection* returned by chdb_connect
	// params serialises parameterised queries: chDB keeps bound parameters
	// in the connection's context for the duration of a call, so two
	// concurrent calls can see each other's (or none: "Substitution … is
	// not set"). Queries without parameters take no lock here; chDB runs
	// a connection's statements one at a time itself.
	params sync.Mutex
}

// openConnection starts chDB's embedded server on dataDir, or opens a
// second session on the one already running there.
func openConnection(lib *libchdb, dataDir string) (*connection, error) {
	if err := keepGoSignalHandlers(func() { lib.setSignalHandlersEnabled(0) }); err != nil {
		return nil, fmt.Errorf("open chdb: %w", err)
	}
	argv := []string{"clickhouse", "--path=" + dataDir}
	c := lib.connect(len(argv), cStrings(argv))
	if c == nil {
		return nil, fmt.Errorf("open chdb at %s: chdb_connect failed", dataDir)
	}
	return &connection{lib: lib, conn: c}, nil
}

// handle dereferences chdb_connection* to the chdb_connection the query
// functions take.
func (c *connection) handle() unsafe.Pointer {
	return *(*unsafe.Pointer)(c.conn)
}

// query runs one statement and returns its output in format. Parameters bind
// server-side to {name:Type} placeholders; values are in ClickHouse's escaped
// text form (see escapeParam).
func (c *connection) query(query, format string, names, values []string) ([]byte, error) {
	if len(names) == 0 {
		return c.queryBytes([]byte(query), format)
	}
	c.params.Lock()
	defer c.params.Unlock()
	return c.result(c.lib.queryWithParams(c.handle(), query, format, cStrings(names), cStrings(values), uintptr(len(names))))
}

// queryBytes runs one statement given as bytes (binary-safe: inline insert
// data may hold any byte) and returns its output in format.
func (c *connection) queryBytes(query []byte, format string) ([]byte, error) {
	if len(query) == 0 {
		return nil, errors.New("empty query")
	}
	return c.result(c.lib.queryN(c.handle(), &query[0], uintptr(len(query)), format, uintptr(len(format))))
}

// result copies a chdb_result's output (or error) into Go memory and frees it.
func (c *connection) result(res unsafe.Pointer) ([]byte, error) {
	if res == nil {
		return nil, nil
	}
	defer c.lib.destroyResult(res)
	if msg := c.lib.resultError(res); msg != "" {
		return nil, errors.New(msg)
	}
	n := c.lib.resultLength(res)
	if n == 0 {
		return nil, nil
	}
	buf := c.lib.resultBuffer(res)
	out := make([]byte, n)
	copy(out, unsafe.Slice((*byte)(buf), n))
	return out, nil
}

// close shuts the embedded server down.
func (c *connection) close() {
	c.lib.closeConn(c.conn)
}
