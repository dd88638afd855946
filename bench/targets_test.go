package bench

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStartReportsATargetThatExits: a target that exits before it
// listens (budgetd without its engine's library, say) is reported at
// once, with the end of its log, which the harness removes with the
// run's directory: the harness waited out its two-minute deadline and
// then named a log that no longer existed.
func TestStartReportsATargetThatExits(t *testing.T) {
	port, err := FreePort()
	require.NoError(t, err)
	_, err = start(t.Context(), t.TempDir(), "quitter", "127.0.0.1:"+strconv.Itoa(port),
		"sh", "-c", "echo starting; echo 'libchdb.so not found' >&2; exit 1")
	require.Error(t, err)
	// Found by its exit, not by the deadline ("did not listen").
	require.Contains(t, err.Error(), "quitter exited before it listened")
	require.Contains(t, err.Error(), "libchdb.so not found")
}
