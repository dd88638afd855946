package embedded

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/store/chsql"
)

// TestCloseWaitsForCallsItsCallersLeft closes the connection while a query
// whose caller gave up is still running in chDB. chDB's call cannot be
// interrupted, so it finishes in the background; shutting the engine down
// under it crashed the process (SIGSEGV). Close must wait for it, and a
// call after Close must fail instead of running.
func TestCloseWaitsForCallsItsCallersLeft(t *testing.T) {
	c, err := Connect(t.TempDir())
	require.NoError(t, err)

	// About two seconds in chDB, whatever the machine's speed.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err = c.Exec(ctx, "SELECT sleepEachRow(0.5) FROM numbers(4) SETTINGS max_block_size = 1", nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	require.NoError(t, c.Close())
	err = c.Exec(t.Context(), "SELECT 1", nil)
	require.ErrorIs(t, err, errClosed)
}

// TestInsertsDoNotWaitForReads: chDB runs one statement at a time on a
// connection, so on a shared one the write path's inserts waited behind
// every read the API ran. An insert must finish while a slow read is
// still running.
func TestInsertsDoNotWaitForReads(t *testing.T) {
	c := connectWithTable(t)
	ctx := t.Context()
	// Asked on an insert connection: the read connection is busy.
	insertDuring(t, c, c.writers, func() error { return c.Exec(ctx, slowStatement, nil) })
	n, err := c.Query(ctx, "SELECT count() FROM nat.t", nil)
	require.NoError(t, err)
	require.True(t, n.Next())
	var rows uint64
	require.NoError(t, n.Scan(&rows))
	require.EqualValues(t, 2, rows, "the read connection sees what the insert connection wrote")
}

// TestReadsDoNotWaitForReads: a read must run while another, slow one is
// running (reads take one of readConnections), and a parameterised one
// too (chDB binds parameters per connection). With one reads connection
// the problems list's reads ran one after another, and a trace opened
// during a slow list waited for it.
func TestReadsDoNotWaitForReads(t *testing.T) {
	c, err := Connect(t.TempDir())
	require.NoError(t, err)
	defer c.Close()
	ctx := t.Context()

	slow := make(chan error, 1)
	go func() { // about 6 s in chDB
		slow <- c.Exec(ctx, "SELECT sleepEachRow(0.75) FROM numbers({n:UInt64}) SETTINGS max_block_size = 1",
			chsql.Params{chsql.P("n", uint64(8))})
	}()
	// Asked through Query, so it runs only on another reads connection
	// while the slow read runs: on the same one it would see none.
	require.Eventually(t, func() bool {
		rows, err := c.Query(ctx, "SELECT count() FROM system.processes WHERE query LIKE {q:String}",
			chsql.Params{chsql.P("q", "SELECT sleepEachRow%")})
		if err != nil {
			return false
		}
		defer rows.Close()
		var n uint64
		return rows.Next() && rows.Scan(&n) == nil && n == 1
	}, 5*time.Second, 10*time.Millisecond)
	select {
	case err := <-slow:
		t.Fatalf("the slow read ended (%v) before a read saw it running", err)
	default:
	}
	require.NoError(t, <-slow)
}

// TestInsertsDoNotWaitForInserts: the write path has two writers, the
// drainer and the analysis pipeline, and with one insert connection each
// waited for the other's inserts. An insert must finish while another
// statement holds an insert connection.
func TestInsertsDoNotWaitForInserts(t *testing.T) {
	c := connectWithTable(t)
	insertDuring(t, c, c.readers, func() error {
		w := <-c.writers
		defer func() { c.writers <- w }()
		_, err := w.queryBytes([]byte(slowStatement), "TabSeparated")
		return err
	})
}

// slowStatement runs about 6 s in chDB, whatever the machine's speed.
const slowStatement = "SELECT sleepEachRow(0.75) FROM numbers(8) SETTINGS max_block_size = 1"

// connectWithTable connects to a new engine and creates nat.t.
func connectWithTable(t *testing.T) *Conn {
	c, err := Connect(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.Exec(t.Context(), "CREATE DATABASE IF NOT EXISTS nat", nil))
	require.NoError(t, c.Exec(t.Context(), nativeTable("nat.t", ""), nil))
	return c
}

// insertDuring runs busy (slowStatement on some connection) in the
// background, waits until the engine runs it, asking on a connection of
// ask, and requires an insert into nat.t to finish before busy does.
func insertDuring(t *testing.T, c *Conn, ask chan *connection, busy func() error) {
	done := make(chan error, 1)
	go func() { done <- busy() }()
	require.Eventually(t, func() bool { return runningOn(ask, "SELECT sleepEachRow%") == 1 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, c.Insert(t.Context(), "nat.t", chsql.OneBlock(nativeBlock()), "tok-1"))
	select {
	case err := <-done:
		t.Fatalf("the insert finished after the statement it ran beside (%v): it waited for it", err)
	default:
	}
	require.NoError(t, <-done)
}

// runningOn counts the statements like pattern the engine is running,
// asked on a connection of pool; -1 when the question fails.
func runningOn(pool chan *connection, pattern string) int {
	conn := <-pool
	defer func() { pool <- conn }()
	out, err := conn.queryBytes([]byte("SELECT count() FROM system.processes WHERE query LIKE '"+pattern+"'"), "TabSeparated")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return -1
	}
	return n
}
