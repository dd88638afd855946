package memlimit

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

var defaults = Bounds{Assembly: 1 << 30, InFlight: 128 << 20, Batch: 64 << 20}

func TestChoose(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name       string
		env        string
		configured int64
		machine    int64
		dedup      int64 // Bounds.Dedup
		want       Choice
	}{
		{"the environment wins", "700MiB", 2 * gib, 24 * gib, 0, Choice{Source: "GOMEMLIMIT", Why: "set in the environment: 700MiB"}},
		{"explicit", "", gib, 24 * gib, 0, Choice{Bytes: gib, Source: "memory.go_limit_bytes"}},
		{"none", "", -1, 24 * gib, 0, Choice{Bytes: math.MaxInt64, Source: "memory.go_limit_bytes", Why: "-1: no limit"}},
		{"derived from the bounds", "", 0, 24 * gib, 0, Choice{Bytes: gib + 128<<20 + 2*64<<20 + BaseBytes, Source: "derived",
			Why: "analyze.assembly.max_bytes 1024 MiB + ingest.max_in_flight_bytes 128 MiB + 2 × ingest.durability.wal.batch_bytes 64 MiB + 512 MiB"}},
		{"derived, capped by a small container", "", 0, 2 * gib, 0, Choice{Bytes: 3 * gib / 2, Source: "derived",
			Why: "analyze.assembly.max_bytes 1024 MiB + ingest.max_in_flight_bytes 128 MiB + 2 × ingest.durability.wal.batch_bytes 64 MiB + 512 MiB, capped at 75 % of the 2048 MiB the process may use"}},
		{"derived, capped less the dedup tables", "", 0, 2 * gib, 128 << 20, Choice{Bytes: 3*gib/2 - 128<<20, Source: "derived",
			Why: "analyze.assembly.max_bytes 1024 MiB + ingest.max_in_flight_bytes 128 MiB + 2 × ingest.durability.wal.batch_bytes 64 MiB + 512 MiB, capped at 75 % of the 2048 MiB the process may use less 128 MiB for the dedup tables"}},
		{"derived, capped, a dedup window too large for the machine", "", 0, 2 * gib, 2 * gib, Choice{Bytes: 3 * gib / 4, Source: "derived",
			Why: "analyze.assembly.max_bytes 1024 MiB + ingest.max_in_flight_bytes 128 MiB + 2 × ingest.durability.wal.batch_bytes 64 MiB + 512 MiB, capped at 75 % of the 2048 MiB the process may use less 768 MiB for the dedup tables"}},
		{"derived, machine unknown", "", 0, 0, 0, Choice{Bytes: gib + 128<<20 + 2*64<<20 + BaseBytes, Source: "derived",
			Why: "analyze.assembly.max_bytes 1024 MiB + ingest.max_in_flight_bytes 128 MiB + 2 × ingest.durability.wal.batch_bytes 64 MiB + 512 MiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := defaults
			b.Dedup = tt.dedup
			require.Equal(t, tt.want, Choose(tt.env, tt.configured, b, tt.machine))
		})
	}
}

func TestApplySetsAndRestores(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	prev := Apply(Choice{Bytes: 900 << 20, Source: "memory.go_limit_bytes"})
	require.Equal(t, before, prev)
	require.Equal(t, int64(900<<20), debug.SetMemoryLimit(-1))
	// A GOMEMLIMIT choice leaves the runtime's limit alone.
	require.Equal(t, int64(900<<20), Apply(Choice{Source: "GOMEMLIMIT"}))
	require.Equal(t, int64(900<<20), debug.SetMemoryLimit(-1))
	Apply(Choice{Bytes: prev})
	require.Equal(t, before, debug.SetMemoryLimit(-1))
}

func TestChooseGCPercent(t *testing.T) {
	require.Equal(t, GCChoice{Source: "GOGC"}, ChooseGCPercent("200", 80), "the environment wins")
	require.Equal(t, GCChoice{Percent: 80, Source: "memory.gc_percent"}, ChooseGCPercent("", 80))
	require.Equal(t, GCChoice{Percent: -1, Source: "memory.gc_percent"}, ChooseGCPercent("", -1), "off")
	require.Equal(t, GCChoice{Percent: DefaultGCPercent, Source: "default"}, ChooseGCPercent("", 0))
}

func TestApplyGCSetsAndRestores(t *testing.T) {
	before := GCPercent()
	prev := ApplyGC(GCChoice{Percent: 37, Source: "memory.gc_percent"})
	require.Equal(t, before, prev)
	require.Equal(t, 37, GCPercent())
	require.Equal(t, 37, GCPercent(), "reading leaves it")
	ApplyGC(GCChoice{Percent: -1, Source: "memory.gc_percent"})
	require.Equal(t, -1, GCPercent(), "off")
	ApplyGC(GCChoice{Percent: 0, Source: "memory.gc_percent"})
	require.Equal(t, 0, GCPercent(), "zero, which Go allows")
	ApplyGC(GCChoice{Percent: 37, Source: "memory.gc_percent"})
	// A GOGC choice leaves the runtime's percent alone.
	require.Equal(t, 37, ApplyGC(GCChoice{Source: "GOGC"}))
	require.Equal(t, 37, GCPercent())
	ApplyGC(GCChoice{Percent: prev})
	require.Equal(t, before, GCPercent())
}

func TestMachineBytes(t *testing.T) {
	n, total := MachineBytes(), memTotal()
	require.Positive(t, total, "/proc/meminfo has MemTotal")
	require.Positive(t, n)
	require.LessOrEqual(t, n, total, "a cgroup limit counts only below the machine's memory")
}
