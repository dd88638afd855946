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
	c, err := Connect(t.TempDir())
	require.NoError(t, err)
	defer c.Close()
	ctx := t.Context()
	require.NoError(t, c.Exec(ctx, "CREATE DATABASE IF NOT EXISTS nat", nil))
	require.NoError(t, c.Exec(ctx, nativeTable("nat.t", ""), nil))

	read := make(chan error, 1)
	go func() { // about 6 s in chDB
		read <- c.Exec(ctx, "SELECT sleepEachRow(0.75) FROM numbers(8) SETTINGS max_block_size = 1", nil)
	}()
	// Wait until the read runs, asking on an insert connection (the read
	// connection is busy with it).
	require.Eventually(t, func() bool { return runningOn(c.writers, "SELECT sleepEachRow%") == 1 }, 5*time.Second, 10*time.Millisecond)

	require.NoError(t, c.Insert(ctx, "nat.t", chsql.OneBlock(nativeBlock()), "tok-1"))
	select {
	case err := <-read:
		t.Fatalf("the insert finished after the read (%v): it waited for it", err)
	default:
	}
	require.NoError(t, <-read)
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
	c, err := Connect(t.TempDir())
	require.NoError(t, err)
	defer c.Close()
	ctx := t.Context()
	require.NoError(t, c.Exec(ctx, "CREATE DATABASE IF NOT EXISTS nat", nil))
	require.NoError(t, c.Exec(ctx, nativeTable("nat.t", ""), nil))

	busy := make(chan error, 1)
	go func() { // about 6 s in chDB, on an insert connection
		w := <-c.writers
		defer func() { c.writers <- w }()
		_, err := w.queryBytes([]byte("SELECT sleepEachRow(0.75) FROM numbers(8) SETTINGS max_block_size = 1"), "TabSeparated")
		busy <- err
	}()
	require.Eventually(t, func() bool { return runningOn(c.readers, "SELECT sleepEachRow%") == 1 }, 5*time.Second, 10*time.Millisecond)

	require.NoError(t, c.Insert(ctx, "nat.t", chsql.OneBlock(nativeBlock()), "tok-1"))
	select {
	case err := <-busy:
		t.Fatalf("the insert finished after the statement holding an insert connection (%v): it waited for it", err)
	default:
	}
	require.NoError(t, <-busy)
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
