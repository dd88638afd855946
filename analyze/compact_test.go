package analyze

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/schema"
)

// TestCompactKeepsFindings analyses every fixture twice, from whole and from
// compacted spans, and expects the same report: compaction drops only what
// the detectors never read.
func TestCompactKeepsFindings(t *testing.T) {
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join("..", "fixtures", "*.json"))
	require.NoError(t, err)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".golden.json") {
			continue
		}
		spans, err := ingest.ReadSpansFile(f, conv)
		require.NoError(t, err)
		compacted := make([]schema.Span, len(spans))
		for i, s := range spans {
			compacted[i] = Compact(s)
		}
		require.Equal(t, Analyze(spans, now, DefaultConfig()), Analyze(compacted, now, DefaultConfig()), f)
		n++
	}
	require.Positive(t, n)
}
