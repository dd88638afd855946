package clickhousetest

import "testing"

// TestFreePortGivesEachPortOnce: the ports of a cluster's servers are all
// taken before any server binds one, so no two may be the same.
func TestFreePortGivesEachPortOnce(t *testing.T) {
	seen := map[int]bool{}
	for range 3000 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d given twice (after %d ports)", port, len(seen))
		}
		seen[port] = true
	}
}
