// Package memlimit chooses Go's soft memory limit and its collector's
// percent (GOGC) for `budgetd serve`.
//
// Go's collector lets the heap grow to about twice the live heap between
// collections (GOGC=100), with no regard for the machine: a burst that
// fills trace assembly can then take the process past its container's limit
// although every buffer of budgetd is bounded. A soft limit makes Go collect
// harder as the heap nears it instead. budgetd derives one from its own
// bounds unless the operator chose: GOMEMLIMIT in the environment (which the
// Go runtime reads itself) wins, then memory.go_limit_bytes.
//
// Between collections Go lets the heap grow by GOGC percent of the live
// heap (100 unless set). Most of budgetd's live heap is long-lived (the
// spans assembly holds for analyze.assembly.idle), and its allocation rate
// is low for its heap, so a lower percent costs little CPU and saves much
// memory: budgetd sets DefaultGCPercent unless GOGC or memory.gc_percent
// chose.
package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
)

// BaseBytes is what the derived limit allows besides the configured
// buffers: per-edge statistics, caches, the API's queries and the runtime's
// own overhead. The live Go heap of a server under sustained load, less its
// assembly and batches, measured 250–350 MiB (docs/performance.md).
const BaseBytes = 512 << 20

// MachineShare is the most of the machine's memory (or its container's
// limit) a derived limit takes: the rest is the embedded engine's own heap,
// which Go's limit does not cover, and the page cache.
const MachineShare = 0.75

// Bounds are the configured sizes the derived limit adds up.
type Bounds struct {
	// Assembly is analyze.assembly.max_bytes: spans held until their trace
	// is analysed.
	Assembly int64
	// InFlight is ingest.max_in_flight_bytes: requests being decoded.
	InFlight int64
	// Batch is ingest.durability.wal.batch_bytes: one batch being built
	// and one being inserted.
	Batch int64
	// Dedup is what the dedup window's fingerprint tables take when full
	// (durable.DedupConfig.TableBytes). They are mapped outside Go's heap,
	// so they come out of the machine's share rather than into the limit.
	Dedup int64
}

// Choice is the limit chosen and why.
type Choice struct {
	// Bytes is the limit; math.MaxInt64 means none. It is 0 when the
	// environment set GOMEMLIMIT, which the runtime has applied already.
	Bytes int64
	// Source is "GOMEMLIMIT", "memory.go_limit_bytes" or "derived".
	Source string
	// Why says how a derived limit was reached.
	Why string
}

// Choose picks the limit. env is GOMEMLIMIT's value ("" when unset),
// configured memory.go_limit_bytes (0 derives, -1 sets none), machine the
// memory available to the process in bytes (0 when unknown).
func Choose(env string, configured int64, b Bounds, machine int64) Choice {
	switch {
	case env != "":
		return Choice{Source: "GOMEMLIMIT", Why: "set in the environment: " + env}
	case configured < 0:
		return Choice{Bytes: math.MaxInt64, Source: "memory.go_limit_bytes", Why: "-1: no limit"}
	case configured > 0:
		return Choice{Bytes: configured, Source: "memory.go_limit_bytes"}
	}
	sum := b.Assembly + b.InFlight + 2*b.Batch + BaseBytes
	c := Choice{Bytes: sum, Source: "derived", Why: fmt.Sprintf(
		"analyze.assembly.max_bytes %s + ingest.max_in_flight_bytes %s + 2 × ingest.durability.wal.batch_bytes %s + %s",
		mib(b.Assembly), mib(b.InFlight), mib(b.Batch), mib(BaseBytes))}
	share := int64(float64(machine) * MachineShare)
	// A dedup window too large for the machine still leaves Go half its
	// share: a limit near zero would have it collect without pause.
	limit := max(share-b.Dedup, share/2)
	if machine > 0 && limit < sum {
		c.Bytes = limit
		c.Why += fmt.Sprintf(", capped at %.0f %% of the %s the process may use", 100*MachineShare, mib(machine))
		if b.Dedup > 0 {
			c.Why += fmt.Sprintf(" less %s for the dedup tables", mib(share-limit))
		}
	}
	return c
}

// Apply sets the limit and returns the one it replaced, for a caller that
// restores it. A GOMEMLIMIT choice is left to the runtime.
func Apply(c Choice) (previous int64) {
	if c.Bytes == 0 {
		return debug.SetMemoryLimit(-1) // reads it only
	}
	return debug.SetMemoryLimit(c.Bytes)
}

// DefaultGCPercent is the collector's percent budgetd sets when neither
// GOGC nor memory.gc_percent chose one. At 50k spans a second for five
// minutes on 2 cores, 50 against Go's 100 took peak RSS from 1,078–1,144
// to 955–958 MiB for 0–2 % more CPU a span (docs/performance.md, round 2
// steps 46–47).
const DefaultGCPercent = 50

// GCChoice is the collector's percent chosen and why.
type GCChoice struct {
	// Percent is GOGC's value: -1 is off (only the memory limit starts a
	// collection). It is unset when the environment set GOGC, which the
	// runtime has applied already.
	Percent int
	// Source is "GOGC", "memory.gc_percent" or "default".
	Source string
}

// ChooseGCPercent picks the collector's percent. env is GOGC's value (""
// when unset), configured memory.gc_percent (0 chooses DefaultGCPercent).
func ChooseGCPercent(env string, configured int) GCChoice {
	switch {
	case env != "":
		return GCChoice{Source: "GOGC"}
	case configured != 0:
		return GCChoice{Percent: configured, Source: "memory.gc_percent"}
	}
	return GCChoice{Percent: DefaultGCPercent, Source: "default"}
}

// ApplyGC sets the percent and returns the one it replaced, for a caller
// that restores it. A GOGC choice is left to the runtime (and returned).
func ApplyGC(c GCChoice) (previous int) {
	if c.Source == "GOGC" {
		return GCPercent()
	}
	return debug.SetGCPercent(c.Percent)
}

// GCPercent returns the collector's percent in effect (-1 when off), read
// without setting it.
func GCPercent() int {
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(sample)
	return int(int64(sample[0].Value.Uint64())) // off reads as -1's bits
}

func mib(n int64) string { return strconv.FormatInt(n>>20, 10) + " MiB" }

// MachineBytes returns the memory the process may use: its cgroup's limit
// (v2 memory.max, else v1 memory.limit_in_bytes) when that is below the
// machine's, else MemTotal from /proc/meminfo; 0 when none can be read.
func MachineBytes() int64 {
	total := memTotal()
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err == nil && n > 0 && (total == 0 || n < total) {
			return n // "max" (v2) and v1's huge "unlimited" fall through
		}
		break
	}
	return total
}

// memTotal reads MemTotal from /proc/meminfo, in bytes.
func memTotal() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
