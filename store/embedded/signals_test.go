package embedded

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGoPanicsSurviveChDB checks that with chDB running in the process a nil
// dereference still panics (and can be recovered) instead of hanging in
// chDB's crash handler.
func TestGoPanicsSurviveChDB(t *testing.T) {
	c, err := Connect(t.TempDir())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Version(t.Context())
	require.NoError(t, err)

	recovered := func() (r any) {
		defer func() { r = recover() }()
		var p *int
		return *p
	}()
	require.NotNil(t, recovered, "the nil dereference panicked")
}
