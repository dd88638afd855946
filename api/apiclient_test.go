package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/budgetd/budgetd/api/apiclient"
	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
)

// TestGeneratedClient calls a server on the embedded store, loaded with the
// fixtures, through the client generated from openapi.yaml (api/apiclient).
// Each answer the client decodes must encode back to the JSON the server
// sent, which a hand-written request with the same query also gets: a field
// the description lacks or types wrongly, a null it does not allow, or a
// parameter it names or encodes differently from the handler fails here. The
// decoded figures are then checked against the fixtures.
func TestGeneratedClient(t *testing.T) {
	st := engines()[0].open(t)
	l := loadFixtures(t, st)
	ts := newTestServer(t, st)
	c, err := apiclient.NewClientWithResponses(ts.URL)
	require.NoError(t, err)
	ctx := context.Background()
	since := l.first.Add(-time.Minute).Format(time.RFC3339)
	until := l.last.Add(time.Hour).Format(time.RFC3339)
	win := "since=" + url.QueryEscape(since) + "&until=" + url.QueryEscape(until)

	health, err := c.GetHealthzWithResponse(ctx)
	require.NoError(t, err)
	requireServed(t, ts, "/healthz", health.StatusCode(), health.Body, health.JSON200)
	require.Equal(t, "ok", *health.JSON200.Status)

	ready, err := c.GetReadyzWithResponse(ctx)
	require.NoError(t, err)
	requireServed(t, ts, "/readyz", ready.StatusCode(), ready.Body, ready.JSON200)
	require.Equal(t, "ready", *ready.JSON200.Status)
	require.Positive(t, *ready.JSON200.SchemaVersion)

	findings, err := c.ListFindingsWithResponse(ctx, &apiclient.ListFindingsParams{Limit: new(1000)})
	require.NoError(t, err)
	requireServed(t, ts, "/api/v1/findings?limit=1000", findings.StatusCode(), findings.Body, findings.JSON200)
	require.Len(t, findings.JSON200.Findings, len(l.findings))
	require.Nil(t, findings.JSON200.Next, "one page")

	// Filters and the cursor, as the client encodes them.
	orphaned, err := c.ListFindingsWithResponse(ctx, &apiclient.ListFindingsParams{
		Kind: new(apiclient.OrphanedWork), Service: new("gateway"), Since: &since, Until: &until, Limit: new(2),
	})
	require.NoError(t, err)
	requireServed(t, ts, "/api/v1/findings?kind=orphaned_work&service=gateway&limit=2&"+win,
		orphaned.StatusCode(), orphaned.Body, orphaned.JSON200)
	require.Len(t, orphaned.JSON200.Findings, 2)
	require.NotNil(t, orphaned.JSON200.Next, "the gateway's orphaned work fills more than a page of 2")
	next, err := c.ListFindingsWithResponse(ctx, &apiclient.ListFindingsParams{
		Kind: new(apiclient.OrphanedWork), Service: new("gateway"), Since: &since, Until: &until, Limit: new(2),
		Next: orphaned.JSON200.Next,
	})
	require.NoError(t, err)
	requireServed(t, ts, "/api/v1/findings?kind=orphaned_work&service=gateway&limit=2&"+win+"&next="+url.QueryEscape(*orphaned.JSON200.Next),
		next.StatusCode(), next.Body, next.JSON200)
	for _, f := range append(orphaned.JSON200.Findings, next.JSON200.Findings...) {
		require.Equal(t, apiclient.OrphanedWork, *f.Kind)
	}
	require.NotEqual(t, *orphaned.JSON200.Findings[0].Id, *next.JSON200.Findings[0].Id, "the second page goes on")

	list, err := c.ListProblemsWithResponse(ctx, &apiclient.ListProblemsParams{Since: &since, Until: &until, Limit: new(1000)})
	require.NoError(t, err)
	requireServed(t, ts, "/api/v1/problems?limit=1000&"+win, list.StatusCode(), list.Body, list.JSON200)
	var ids []string
	for _, p := range list.JSON200.Problems {
		ids = append(ids, *p.Id)
	}
	var want []string
	for _, p := range problems.Group(l.findings, problems.Options{}) {
		want = append(want, p.ID)
	}
	require.Equal(t, want, ids, "the fixtures' findings grouped, ranked by impact")

	byOcc, err := c.ListProblemsWithResponse(ctx, &apiclient.ListProblemsParams{
		Since: &since, Until: &until, Sort: new(apiclient.Occurrences), State: new(apiclient.ListProblemsParamsStateActive), Limit: new(3),
	})
	require.NoError(t, err)
	requireServed(t, ts, "/api/v1/problems?sort=occurrences&state=active&limit=3&"+win, byOcc.StatusCode(), byOcc.Body, byOcc.JSON200)
	require.NotEmpty(t, byOcc.JSON200.Problems)

	first := list.JSON200.Problems[0]
	one, err := c.GetProblemWithResponse(ctx, *first.Id, &apiclient.GetProblemParams{Since: &since, Until: &until})
	require.NoError(t, err)
	requireServed(t, ts, "/api/v1/problems/"+*first.Id+"?"+win, one.StatusCode(), one.Body, one.JSON200)
	require.Equal(t, first, *one.JSON200.Problem)
	require.NotEmpty(t, *one.JSON200.Findings)

	edges, err := c.ListEdgesWithResponse(ctx, &apiclient.ListEdgesParams{Since: &since, Until: &until, Limit: new(1000)})
	require.NoError(t, err)
	requireServed(t, ts, "/api/v1/edges?limit=1000&"+win, edges.StatusCode(), edges.Body, edges.JSON200)
	verdicts := map[string]bool{}
	for _, f := range l.findings {
		if f.Kind == schema.KindLatencyInversion {
			verdicts[f.Path] = true
		}
	}
	inverted := map[string]bool{}
	for _, e := range *edges.JSON200.Edges {
		if *e.Inversion {
			inverted[*e.CallerService+":"+*e.CallerOperation+pathSep+*e.CalleeService+":"+*e.CalleeOperation] = true
		}
	}
	require.Equal(t, verdicts, inverted, "the edges flagged are those with a latency_inversion finding")

	paths, err := c.ListPathsWithResponse(ctx, &apiclient.ListPathsParams{Since: &since, Until: &until, Limit: new(1000)})
	require.NoError(t, err)
	requireServed(t, ts, "/api/v1/paths?limit=1000&"+win, paths.StatusCode(), paths.Body, paths.JSON200)
	require.NotEmpty(t, *paths.JSON200.Paths)

	sum, err := c.GetSummaryWithResponse(ctx, &apiclient.GetSummaryParams{Since: &since, Until: &until})
	require.NoError(t, err)
	requireServed(t, ts, "/api/v1/summary?"+win, sum.StatusCode(), sum.Body, sum.JSON200)
	total := 0
	for _, n := range *sum.JSON200.FindingsByKind {
		total += n
	}
	require.Equal(t, len(l.findings), total)
	require.Positive(t, *sum.JSON200.Requests)

	f0 := l.findings[0]
	trace, err := c.GetTraceWithResponse(ctx, f0.TraceID, nil)
	require.NoError(t, err)
	requireServed(t, ts, "/api/v1/traces/"+f0.TraceID, trace.StatusCode(), trace.Body, trace.JSON200)
	id, err := schema.ParseTraceID(f0.TraceID)
	require.NoError(t, err)
	require.Len(t, *trace.JSON200.Spans, l.spans[id])
	for _, s := range *trace.JSON200.Spans {
		require.True(t, s.Budget.IsSpecified() && !s.Budget.IsNull(), "span %s carries its budget chain", *s.SpanId)
	}

	// Errors decode as the Error schema.
	bad, err := c.ListFindingsWithResponse(ctx, &apiclient.ListFindingsParams{Limit: new(0)})
	require.NoError(t, err)
	requireServed(t, ts, "/api/v1/findings?limit=0", bad.StatusCode(), bad.Body, bad.JSON400)
	require.Equal(t, apiclient.ErrorErrorCodeBadParameter, *bad.JSON400.Error.Code)
	missing, err := c.GetTraceWithResponse(ctx, "0123456789abcdef0123456789abcdef", nil)
	require.NoError(t, err)
	requireServed(t, ts, "/api/v1/traces/0123456789abcdef0123456789abcdef", missing.StatusCode(), missing.Body, missing.JSON404)
	require.Equal(t, apiclient.ErrorErrorCodeNotFound, *missing.JSON404.Error.Code)

	doc, err := c.GetOpenAPIWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, doc.StatusCode())
	require.Equal(t, openAPI, doc.Body)
	var embedded map[string]any
	require.NoError(t, yaml.Unmarshal(openAPI, &embedded))
	require.Equal(t, embedded, *doc.YAML200, "the client decodes the description it was generated from")

	metrics, err := c.GetMetricsWithResponse(ctx)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, metrics.StatusCode())
	require.Contains(t, string(metrics.Body), "budgetd_api_requests_total")
}

// requireServed checks one answer of the generated client: decoded is what
// it decoded from body (a JSON200, JSON400, … field). The request raw, made
// by hand, gets the same status and JSON, and decoded encodes back to that
// JSON: nothing the server sent was lost or changed in decoding.
func requireServed(t *testing.T, ts *httptest.Server, raw string, status int, body []byte, decoded any) {
	t.Helper()
	resp, err := http.Get(ts.URL + raw)
	require.NoError(t, err)
	want, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, resp.StatusCode, status, "GET %s: %s", raw, body)
	require.JSONEq(t, string(want), string(body), "GET %s by hand and through the client", raw)
	v := reflect.ValueOf(decoded)
	require.False(t, v.IsNil(), "GET %s: the client decoded no %d answer from %s", raw, status, body)
	again, err := json.Marshal(decoded)
	require.NoError(t, err)
	require.JSONEq(t, string(body), string(again), "GET %s: the answer as the client decoded it", raw)
}
