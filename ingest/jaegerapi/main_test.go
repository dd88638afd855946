package jaegerapi

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests: not Read's (it
// owns an HTTP transport), not a request the caller left.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
