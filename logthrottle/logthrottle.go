// Package logthrottle limits a kind of log line to one per interval, for
// the lines a failing dependency or a misbehaving sender would otherwise
// repeat for every request or attempt (the metrics count every one).
package logthrottle

import (
	"sync"
	"time"
)

// Throttle lets one line per key through per interval. Keys come from a
// closed set of kinds (never from sender or span data), and the line that
// gets through reports how many were held back. It is safe for concurrent
// use.
type Throttle struct {
	every time.Duration

	mu   sync.Mutex
	last map[string]time.Time
	held map[string]int
}

// New returns a Throttle letting one line per key through every interval.
func New(every time.Duration) *Throttle {
	return &Throttle{every: every, last: make(map[string]time.Time), held: make(map[string]int)}
}

// Allow reports whether a line of key may be logged at now, and how many
// were held back since the last one that was.
func (t *Throttle) Allow(key string, now time.Time) (ok bool, suppressed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if last, seen := t.last[key]; seen && now.Sub(last) < t.every {
		t.held[key]++
		return false, 0
	}
	t.last[key] = now
	suppressed = t.held[key]
	t.held[key] = 0
	return true, suppressed
}
