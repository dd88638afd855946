// Package embeddedtest gives a package's tests the embedded engine. chDB
// runs one engine per process, so the tests of one binary share one data
// directory, made on first use and removed by Main, and each test opens a
// database of its own, dropped when it ends.
package embeddedtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/store/chsql"
	"github.com/budgetd/budgetd/store/embedded"
)

var shared struct {
	once sync.Once
	dir  string
	err  error
}

// DataDir returns the process's chDB data directory, making it on first
// use.
func DataDir(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() { shared.dir, shared.err = os.MkdirTemp("", "budgetd-test-chdb-") })
	require.NoError(t, shared.err, "make the chDB data directory")
	return shared.dir
}

// Cleanup removes the data directory, if one was made. Main calls it; a
// TestMain that runs the tests some other way calls it after them.
func Cleanup() {
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
}

// Main runs the package's tests and removes the data directory: call it
// from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// Open opens a store on a new database named prefix and a unique suffix,
// dropped and closed when the test ends.
func Open(t testing.TB, prefix string) *chsql.Store {
	t.Helper()
	ctx := context.Background()
	s, err := embedded.Open(ctx, embedded.Config{DataDir: DataDir(t), Database: fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.Conn().Exec(ctx, "DROP DATABASE IF EXISTS "+s.Database(), nil)
		_ = s.Close()
	})
	return s
}
