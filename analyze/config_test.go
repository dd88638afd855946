package analyze

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   string // "" for valid
	}{
		{name: "defaults", modify: func(*Config) {}},
		{name: "zero skew tolerance is allowed", modify: func(c *Config) { c.SkewToleranceMs = 0 }},
		{name: "negative skew tolerance", modify: func(c *Config) { c.SkewToleranceMs = -1 }, want: "analyze.skew_tolerance_ms must be >= 0"},
		{name: "NaN skew tolerance", modify: func(c *Config) { c.SkewToleranceMs = math.NaN() }, want: "analyze.skew_tolerance_ms must be >= 0"},
		{name: "huge skew tolerance", modify: func(c *Config) { c.SkewToleranceMs = 1e9 }, want: "analyze.skew_tolerance_ms must be <= 3600000"},
		{name: "threshold of one", modify: func(c *Config) { c.RetryAmplificationThreshold = 1 }, want: "analyze.retry_amplification_threshold must be >= 2"},
		{name: "tiny window", modify: func(c *Config) { c.EdgeWindow = time.Millisecond }, want: "analyze.edge_window must be >= 1s"},
		{name: "no samples", modify: func(c *Config) { c.MinEdgeSamples = 0 }, want: "analyze.min_edge_samples must be >= 1"},
		{name: "no edges", modify: func(c *Config) { c.MaxEdges = 0 }, want: "analyze.max_edges must be >= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.modify(&c)
			err := c.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				require.Equal(t, c, c.sanitized())
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.NoError(t, c.sanitized().Validate(), "sanitized replaces what Validate rejects")
		})
	}
}

func TestConfigValidateReportsEveryKey(t *testing.T) {
	err := Config{SkewToleranceMs: -1}.Validate()
	for _, key := range []string{"skew_tolerance_ms", "retry_amplification_threshold", "edge_window", "min_edge_samples", "max_edges"} {
		require.ErrorContains(t, err, "analyze."+key)
	}
}

func TestNewWithZeroConfigUsesDefaults(t *testing.T) {
	a := New(Config{})
	c := a.Config()
	require.NoError(t, c.Validate())
	require.Equal(t, 0.0, c.SkewToleranceMs, "a zero tolerance is a valid choice and is kept")
	require.Equal(t, DefaultConfig().EdgeWindow, c.EdgeWindow)
}
