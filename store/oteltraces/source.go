package oteltraces

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/budgetd/budgetd/store/engine"
)

// Source is where an exporter's table is read: the engine to connect to
// (read-only, engine.Connect) and the table on it.
type Source struct {
	// Engine connects to a ClickHouse server or to a chDB data directory.
	Engine engine.Config
	// Database and Table name the exporter's table.
	Database, Table string
}

// ParseSource reads a source as users write it — a ClickHouse DSN,
// clickhouse://[user[:password]@]host:port[/DATABASE], or a chDB data
// directory — and a table, TABLE or DATABASE.TABLE. The database is the
// DSN's path or the table's DATABASE. prefix (both only if they agree),
// else "default", the exporter's default. The messages name neither flag
// nor key: callers say which they read.
func ParseSource(source, table string) (Source, error) {
	src := Source{Engine: engine.DefaultConfig()}
	db := ""
	if strings.HasPrefix(source, "clickhouse://") {
		u, err := url.Parse(source)
		if err != nil {
			return src, errors.New("not a clickhouse://host:port/DATABASE DSN")
		}
		db = strings.Trim(u.Path, "/")
		src.Engine.Engine, src.Engine.ClickHouse.DSN = engine.ClickHouse, source
	} else {
		src.Engine.Engine, src.Engine.Embedded.DataDir = engine.Embedded, source
		if st, err := os.Stat(source); err != nil || !st.IsDir() {
			return src, fmt.Errorf("%q is neither a clickhouse:// DSN nor a chDB data directory", source)
		}
	}
	if tdb, t, ok := strings.Cut(table, "."); ok {
		if db != "" && db != tdb {
			return src, fmt.Errorf("the table names database %s, the DSN %s", tdb, db)
		}
		db, table = tdb, t
	}
	if db == "" {
		db = "default"
	}
	src.Database, src.Table = db, table
	return src, nil
}

// Key names the source without its credentials: the server's host and
// port, or the chDB directory's absolute path, and the table. It stays the
// same when a password changes, so a position stored under it survives
// that.
func (s Source) Key() string {
	where := s.Engine.Embedded.DataDir
	if s.Engine.Engine == engine.ClickHouse {
		where = s.Engine.ClickHouse.DSN
		if u, err := url.Parse(where); err == nil {
			where = "clickhouse://" + u.Host
		}
	} else if abs, err := filepath.Abs(where); err == nil {
		where = abs
	}
	return where + " " + s.Database + "." + s.Table
}
