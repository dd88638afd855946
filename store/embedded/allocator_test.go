package embedded

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// allocatorProbeEnv makes the test binary, started again by
// TestAllocatorReadsJEMallocConf, load the library and run a query in the
// data directory the variable names.
const allocatorProbeEnv = "BUDGETD_ALLOCATOR_PROBE"

// TestAllocatorReadsJEMallocConf checks what docs/configuration.md tells
// operators: chDB's allocator (the jemalloc linked into libchdb under the
// je_ prefix) takes its options from JE_MALLOC_CONF. With abort_conf,
// jemalloc aborts on an option it does not know: a child process given
// one must abort while it loads the library, and a child given a valid
// one must load it, run a query and exit cleanly. Were the name another
// (a library built without the prefix reads MALLOC_CONF), both children
// would exit cleanly and the documented setting would silently do nothing.
func TestAllocatorReadsJEMallocConf(t *testing.T) {
	if dir := os.Getenv(allocatorProbeEnv); dir != "" {
		// The parent's directory: a child that aborts cleans up nothing.
		c, err := Connect(dir)
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Version(t.Context())
		require.NoError(t, err)
		return
	}
	probe := func(conf string) ([]byte, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAllocatorReadsJEMallocConf$", "-test.count=1")
		cmd.Env = append(os.Environ(), allocatorProbeEnv+"="+t.TempDir(), "JE_MALLOC_CONF="+conf)
		return cmd.CombinedOutput()
	}
	out, err := probe("abort_conf:true,dirty_decay_ms:1000")
	require.NoError(t, err, "a valid option loads: %s", out)

	out, err = probe("abort_conf:true,budgetd_probe:1")
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child loaded chDB without reading the option: %s", out)
	require.Contains(t, string(out), "SIGABRT", "jemalloc aborted on the option")
	require.Contains(t, string(out), "purego.Dlopen", "while the library loaded")
}
