package api

import (
	"net/http"
	"net/http/pprof"
	"strings"
)

// servePprof serves Go's profiler (api.pprof): the index, the named
// profiles (heap, goroutine, …) and the CPU profile and execution trace.
func servePprof(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, "/debug/pprof/") {
	case "profile":
		pprof.Profile(w, r)
	case "trace":
		pprof.Trace(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "cmdline":
		pprof.Cmdline(w, r)
	default:
		pprof.Index(w, r)
	}
}
