package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/fixtures"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/ingest/translate/translatetest"
)

// analyzeFile runs `budgetd analyze --output json` on one file at the
// fixtures' detection time.
func analyzeFile(t *testing.T, path string) analyze.Report {
	t.Helper()
	out, stderr, err := runCmd(t, "analyze", "--output", "json", "--now", "2025-03-01T12:00:00Z", path)
	require.NoError(t, err)
	require.Empty(t, stderr, "no span may be skipped")
	return readReport(t, []byte(out))
}

// TestAnalyzeJaegerAndZipkinFiles writes every fixture as Jaeger JSON (as
// Jaeger's query service answers) and as Zipkin v2 JSON (as the
// Collector's Zipkin exporter posts it), analyses each file with `budgetd
// analyze` (the format detected from the content) and expects the findings
// and paths of the OTLP original; for Zipkin, whose producers lower-case
// names, without regard to case. A fixture holding something the format
// cannot carry (translatetest.JaegerLosses, ZipkinLosses) is left out and
// logged with the reason; docs/formats.md lists them.
func TestAnalyzeJaegerAndZipkinFiles(t *testing.T) {
	formats := []struct {
		name     string
		format   ingest.Format
		write    func(ptrace.Traces) ([]byte, error)
		losses   func(ptrace.Traces) []string
		foldCase bool
	}{
		{"jaeger", ingest.FormatJaegerJSON, translatetest.JaegerJSON, translatetest.JaegerLosses, false},
		{"zipkin", ingest.FormatZipkinJSON, translatetest.ZipkinJSON, translatetest.ZipkinLosses, true},
	}
	names := fixtures.Names()
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			dir := t.TempDir()
			var excluded []string
			compared, findings := 0, 0
			for _, name := range names {
				data, err := fixtures.Read(name)
				require.NoError(t, err)
				tds, err := ingest.DecodeTraces(data)
				require.NoError(t, err)
				require.Len(t, tds, 1)
				if losses := f.losses(tds[0]); len(losses) > 0 {
					excluded = append(excluded, name)
					t.Logf("%s left out: %s", name, strings.Join(losses, "; "))
					continue
				}
				out, err := f.write(tds[0])
				require.NoError(t, err, name)
				require.Equal(t, f.format, ingest.DetectFormat(out), "%s: the written file is detected as %s", name, f.format)
				path := filepath.Join(dir, name+"."+f.name+".json")
				require.NoError(t, os.WriteFile(path, out, 0o600))
				t.Run(name, func(t *testing.T) {
					want := analyzeFile(t, fixture(name+".json"))
					got := analyzeFile(t, path)
					translatetest.RequireSameFindings(t, want, got, f.foldCase)
					findings += len(want.Findings)
				})
				compared++
			}
			t.Logf("%s: %d of %d fixtures compared (%d findings); left out: %v", f.name, compared, len(names), findings, excluded)
			// A rule that left most fixtures out would make this test pass
			// by comparing nothing.
			require.GreaterOrEqual(t, compared, len(names)*3/4, "fixtures compared")
			require.Positive(t, findings, "findings compared")
		})
	}
}

// TestAnalyzeFormatErrors checks that a file that cannot be read names the
// file, the format tried and the place, and that the help lists the formats.
func TestAnalyzeFormatErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	jaeger := write("jaeger.json", `{"data":[{"traceID":"1","spans":[{"spanID":"xyz"}]}]}`)
	zipkin := write("zipkin.json", `[{"traceId":"1","id":"2","timestamp":"soon"}]`)
	other := write("v3.json", `{"result":{"resourceSpans":[]}}`)
	tests := []struct {
		name, file, wantErr string
	}{
		{"jaeger", jaeger, "read " + jaeger + `: read jaeger json: trace 1 span 1: bad spanID "xyz"`},
		{"zipkin", zipkin, "read " + zipkin + `: read zipkin json: span 1: bad timestamp: "soon" is not a whole number of microseconds`},
		{"unknown object", other, "read " + other + `: read trace file: a JSON object with none of the keys of a format budgetd reads (first key "result"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runCmd(t, "analyze", tt.file)
			require.ErrorContains(t, err, tt.wantErr)
			require.Equal(t, 1, exitCode(err))
		})
	}

	out, _, err := runCmd(t, "analyze", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "Jaeger JSON: the Jaeger UI's trace download")
	require.Contains(t, out, "Zipkin v2 JSON: an array of spans")
}
