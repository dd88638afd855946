package embedded

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
