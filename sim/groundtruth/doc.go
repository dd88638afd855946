// Package groundtruth turns what a simulated system observed from the
// inside — when each caller started and stopped waiting, the timer it set
// itself, when each handler started and stopped working — into the findings
// a correct budgetd must report, and scores budgetd's findings against them
// per finding kind (true positives, false positives, false negatives).
//
// Both simulators use it: package sim (the HTTP chain of the seeds) and
// package sim/shapes (trace shapes from real gRPC, HTTP and queue
// instrumentation). Each fills a Log while it runs and builds its Truth with
// a Builder, choosing the rules its scenarios call for.
//
// A case counts only when it is at least ClearMargin past its threshold; one
// within NoiseMargin of it (or on the good side) is clearly not a problem;
// anything in between is Ambiguous and not scored. budgetd measures between
// span timestamps, the truth between in-process instants, and on a loaded
// machine the two readings of one case differ by a millisecond or two.
package groundtruth
