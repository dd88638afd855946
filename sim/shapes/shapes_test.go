package shapes

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/sim/groundtruth"
)

var updateShapes = flag.Bool("update-shapes", false, "rewrite the generated precision/recall table in docs/experiments.md")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// experimentsDoc is the document whose generated section -update-shapes
// rewrites.
const experimentsDoc = "../../docs/experiments.md"

const (
	beginMarker = "<!-- BEGIN GENERATED: go test ./sim/shapes -update-shapes -->"
	endMarker   = "<!-- END GENERATED -->"
)

// TestShapes runs every scenario (and, where it records budgets, again with
// them stripped), analyses the spans with budgetd's offline entry point and
// scores the findings against the ground truth.
//
// It asserts, for every run: no false positive of any kind (a finding the
// truth rules out is wrong, and costs more than a missed one); recall of
// at least 95 % for every kind the truth expects; in a stripped run, every
// timeout_inversion and latency_inversion finding says it was inferred.
// Failures are the detectors' to fix, not this test's.
func TestShapes(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var rows []groundtruth.Row
	for _, sc := range Scenarios() {
		modes := []bool{false}
		if sc.Recorded {
			modes = append(modes, true)
		}
		for _, strip := range modes {
			mode := "recorded"
			if strip {
				mode = "stripped"
			}
			if !sc.Recorded {
				mode = "none"
			}
			t.Run(sc.Name+"/"+mode, func(t *testing.T) {
				res, err := sc.Run(t.Context(), Options{Strip: strip})
				require.NoError(t, err)
				require.NotEmpty(t, res.Spans)
				rep := analyze.Analyze(res.Spans, now, analyze.DefaultConfig())
				keys := make([]groundtruth.Expect, len(rep.Findings))
				for i := range rep.Findings {
					keys[i] = groundtruth.FindingKey(&rep.Findings[i])
				}
				scores := groundtruth.ScoreKeys(keys, res.Truth)
				t.Logf("%s (%s): %d requests, %d spans, %d expected, %d ambiguous, %d findings\n%s",
					sc.Name, mode, res.Truth.Requests, len(res.Spans), len(res.Truth.Expected),
					len(res.Truth.Ambiguous), len(rep.Findings), groundtruth.Summary(scores))
				falseKeys := map[groundtruth.Expect]bool{}
				for _, k := range groundtruth.False(keys, res.Truth) {
					falseKeys[k] = true
				}
				perKind := map[schema.Kind]int{}
				for i, f := range rep.Findings {
					if falseKeys[keys[i]] {
						delete(falseKeys, keys[i])
						if perKind[f.Kind]++; perKind[f.Kind] <= 3 {
							t.Logf("false %s", describe(f))
						}
					}
				}
				for _, e := range groundtruth.Missed(keys, res.Truth, 3) {
					t.Logf("missed %s on %s (callee %q) trace %s: %s", e.Kind, e.Service, e.Callee, e.TraceID, res.Truth.Notes[e])
				}
				rows = append(rows, groundtruth.Rows(sc.Name, mode, scores)...)
				for _, s := range scores {
					if s.FP > 0 {
						t.Errorf("%s: %d false positives (truth %s)", s.Kind, s.FP, cleanText(res.Truth))
					}
					if s.TP+s.FN > 0 && s.Recall() < 0.95 {
						t.Errorf("%s: recall %.0f %% (%d of %d found)", s.Kind, 100*s.Recall(), s.TP, s.TP+s.FN)
					}
				}
				if strip {
					for _, f := range rep.Findings {
						if (f.Kind == schema.KindTimeoutInversion || f.Kind == schema.KindLatencyInversion) && f.Evidence["inferred"] != 1 {
							t.Errorf("stripped run: %s without evidence inferred=1", describe(f))
						}
					}
				}
			})
		}
	}
	if *updateShapes {
		require.NoError(t, writeTable(rows))
	}
}

func cleanText(t groundtruth.Truth) string {
	if t.Clean() {
		return "clean"
	}
	return "not clean"
}

func describe(f schema.Finding) string {
	keys := make([]string, 0, len(f.Evidence))
	for k := range f.Evidence {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var ev []string
	for _, k := range keys {
		ev = append(ev, fmt.Sprintf("%s=%.1f", k, f.Evidence[k]))
	}
	return fmt.Sprintf("%s on %s (caller %s, callee %s) trace %s span %s path %q [%s]: %s",
		f.Kind, f.Service, f.CallerService, f.CalleeService, f.TraceID, f.SpanID, f.Path, strings.Join(ev, " "), f.Message)
}

// writeTable rewrites the generated section of docs/experiments.md.
func writeTable(rows []groundtruth.Row) error {
	doc, err := os.ReadFile(experimentsDoc)
	if err != nil {
		return fmt.Errorf("read %s: %w", experimentsDoc, err)
	}
	// The document has other generated sections: the end marker is the
	// first one after this section's begin marker.
	i := bytes.Index(doc, []byte(beginMarker))
	j := -1
	if i >= 0 {
		if k := bytes.Index(doc[i:], []byte(endMarker)); k >= 0 {
			j = i + k
		}
	}
	if i < 0 || j < 0 {
		return fmt.Errorf("%s has no %q … %q section", experimentsDoc, beginMarker, endMarker)
	}
	var b bytes.Buffer
	b.Write(doc[:i+len(beginMarker)])
	b.WriteString("\n\n")
	b.WriteString(groundtruth.Table(rows))
	b.WriteString("\n")
	b.Write(doc[j:])
	return os.WriteFile(experimentsDoc, b.Bytes(), 0o644)
}
