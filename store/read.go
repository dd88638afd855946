package store

import "time"

// FromIntervalStart returns w starting at the start of the interval of
// width d (aligned to the Unix epoch) that holds its start: the stats of
// that interval count findings of w too.
func FromIntervalStart(w Window, d time.Duration) Window {
	if d > 0 {
		w.SinceNs -= w.SinceNs % uint64(d)
	}
	return w
}
