package embedded

import (
	"context"
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
	// Wait until the read runs, asking on the insert connection (the read
	// connection is busy with it).
	require.Eventually(t, func() bool {
		out, err := c.w.queryBytes([]byte("SELECT count() FROM system.processes WHERE query LIKE 'SELECT sleepEachRow%'"), "TabSeparated")
		return err == nil && strings.TrimSpace(string(out)) == "1"
	}, 5*time.Second, 10*time.Millisecond)

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
