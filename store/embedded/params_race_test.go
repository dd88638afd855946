package embedded

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/store/chsql"
)

// TestConcurrentParameterisedQueries runs parameterised queries from many
// goroutines at once: each must see its own parameters.
func TestConcurrentParameterisedQueries(t *testing.T) {
	c, err := Connect(t.TempDir())
	require.NoError(t, err)
	defer c.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				want := fmt.Sprintf("g%d-%d", g, i)
				rows, err := c.Query(t.Context(), "SELECT {v:String}", chsql.Params{chsql.P("v", want)})
				require.NoError(t, err)
				require.True(t, rows.Next())
				var got string
				require.NoError(t, rows.Scan(&got))
				require.Equal(t, want, got)
			}
		}()
	}
	wg.Wait()
}
