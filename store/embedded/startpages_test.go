package embedded

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCleanMappings reads the library's mappings out of an smaps file:
// those with no modified page, and only the library's.
func TestCleanMappings(t *testing.T) {
	const lib = "/opt/lib dir/libchdb.so"
	smaps := `55d0c0a00000-55d0c0a01000 r--p 00000000 fd:01 1 /usr/bin/budgetd
Rss:                   4 kB
Private_Dirty:         0 kB
7f6a95400000-7f6a9e56e000 r--p 00000000 fd:01 2 /opt/lib dir/libchdb.so
Size:             150968 kB
Rss:               47040 kB
Private_Clean:     47040 kB
Private_Dirty:         0 kB
VmFlags: rd mr mw me sd
7f6a9e56e000-7f6ab6348000 r-xp 09169000 fd:01 2 /opt/lib dir/libchdb.so
Rss:              125644 kB
Private_Dirty:         0 kB
7f6ab6348000-7f6ab6fc4000 r--p 20f42000 fd:01 2 /opt/lib dir/libchdb.so
Rss:               12768 kB
Private_Dirty:     12764 kB
7f6ab6fc4000-7f6ab701b000 rw-p 21bbd000 fd:01 2 /opt/lib dir/libchdb.so
Private_Dirty:       336 kB
7f6ab701b000-7f6ab7100000 rw-p 00000000 00:00 0
Private_Dirty:         8 kB
7f6ab7200000-7f6ab7300000 r-xp 00000000 fd:01 3 /opt/lib dir/libchdb.so.old
Private_Dirty:         0 kB
7f6ab7400000-7f6ab7500000 r-xp 00000000 fd:01 2 /opt/lib dir/libchdb.so
Private_Dirty:         0 kB
`
	path := filepath.Join(t.TempDir(), "smaps")
	require.NoError(t, os.WriteFile(path, []byte(smaps), 0o600))
	got, err := cleanMappings(path, lib)
	require.NoError(t, err)
	require.Equal(t, []mapping{
		{0x7f6a95400000, 0x7f6a9e56e000},
		{0x7f6a9e56e000, 0x7f6ab6348000},
		{0x7f6ab7400000, 0x7f6ab7500000}, // the last mapping of the file
	}, got)
}

// TestReleaseStartupPages advises every clean mapping of the library this
// process loaded, without error. Whether the kernel then reclaims a page
// depends on other processes mapping it too (go test runs packages side by
// side), so the pages' fall is measured by the harness (docs/performance.md,
// step 41), not here.
func TestReleaseStartupPages(t *testing.T) {
	_, err := loadLibrary()
	require.NoError(t, err)
	path, err := filepath.EvalSymlinks(libraryState.path)
	require.NoError(t, err)
	path, err = filepath.Abs(path)
	require.NoError(t, err)
	clean, err := cleanMappings("/proc/self/smaps", path)
	require.NoError(t, err)
	require.NotEmpty(t, clean, "the library's code is mapped from %s", path)
	want := 0
	for _, m := range clean {
		want += int(m.end - m.start)
	}
	advised, err := releaseStartupPages(libraryState.path)
	require.NoError(t, err)
	require.Equal(t, want, advised)
}
