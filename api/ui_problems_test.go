package api

import (
	"fmt"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/problems"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

// The problems the history adds to the fixtures: one that went quiet for
// hours and came back (regressed), one that went quiet (resolved).
const (
	regressedCaller, regressedCallee = "web", "search"
	resolvedCaller, resolvedCallee   = "order", "ledger"
)

// loadProblemHistory stores requests on two edges the fixtures do not hold,
// each analysed at its own time before detectedAt, so their problems have a
// trend over hours and a state other than active: web → search 5, 4 and
// 3 hours before and 20 minutes before (regressed after a quiet period of
// more than an hour), order → ledger 6, 5.5 and 5 hours before (resolved).
// On each the caller gives up at its 500 ms timeout and the callee works on
// (orphaned work): search for less than a second (warning), ledger for more
// (critical).
func loadProblemHistory(t *testing.T, st store.Store) {
	t.Helper()
	type call struct {
		caller, callerOp, callee, calleeOp string
		work                               uint64 // ms the callee works
		ago                                []time.Duration
	}
	calls := []call{
		{regressedCaller, "GET /search", regressedCallee, "GET /query", 800,
			[]time.Duration{5 * time.Hour, 4 * time.Hour, 3 * time.Hour, 20 * time.Minute}},
		{resolvedCaller, "POST /order", resolvedCallee, "POST /entries", 1600,
			[]time.Duration{6 * time.Hour, 5*time.Hour + 30*time.Minute, 5 * time.Hour}},
	}
	ms := uint64(time.Millisecond)
	for i, c := range calls {
		for j, ago := range c.ago {
			at := detectedAt.Add(-ago)
			base := uint64(at.Add(-2 * time.Minute).UnixNano())
			var id schema.TraceID
			id[0], id[14], id[15] = 0xdd, byte(i+1), byte(j+1)
			sp := func(n byte) schema.SpanID { return schema.SpanID{5: byte(i + 1), 6: byte(j + 1), 7: n} }
			late := uint64(50 * j) // each request's callee overruns by a little more
			spans := []schema.Span{
				{TraceID: id, SpanID: sp(1), Service: c.caller, Name: c.callerOp, Kind: schema.KindServer,
					StartNs: base, EndNs: base + 520*ms},
				{TraceID: id, SpanID: sp(2), ParentSpanID: sp(1), Service: c.caller, Name: c.calleeOp, Kind: schema.KindClient,
					StartNs: base + 5*ms, EndNs: base + 505*ms, StatusCode: schema.StatusError,
					Attrs: schema.Attributes{schema.Int(schema.AttrTimeoutMs, 500), schema.Str(schema.AttrErrorType, "timeout"),
						schema.Str("peer.service", c.callee)}},
				{TraceID: id, SpanID: sp(3), ParentSpanID: sp(2), Service: c.callee, Name: c.calleeOp, Kind: schema.KindServer,
					StartNs: base + 7*ms, EndNs: base + (c.work+late)*ms},
			}
			writeAnalysedAt(t, st, fmt.Sprintf("ui-history-%d-%d", i, j), spans, at)
		}
	}
}

// problemsAPI is GET /api/v1/problems.
type problemsAPI struct {
	Window    windowJSON         `json:"window"`
	Problems  []problems.Problem `json:"problems"`
	Next      string             `json:"next"`
	Truncated bool               `json:"truncated"`
}

// problemAPI is GET /api/v1/problems/{id}.
type problemAPI struct {
	Problem  problems.Problem `json:"problem"`
	Paths    []string         `json:"paths"`
	Findings []schema.Finding `json:"findings"`
}

// problemRow is a row of the problems table as the page shows it.
type problemRow struct {
	ID, Severity, Kind, Call, State, Occurrences, Requests, Impact, Suggestion, Href string
	Bars                                                                             int
}

// problemRows reads the rows of the problems table on the page.
func (u *uiSession) problemRows() []problemRow {
	u.t.Helper()
	var rows []problemRow
	u.eval(`[...document.querySelectorAll('table.problems tbody tr')].map((tr) => ({
		ID: tr.dataset.problemId,
		Severity: tr.querySelector('td.problem .badge').innerText,
		Kind: tr.querySelector('a.problem-link').innerText,
		Href: tr.querySelector('a.problem-link').getAttribute('href'),
		Call: tr.querySelector('td.call').innerText,
		State: tr.children[2].innerText,
		Occurrences: tr.children[3].innerText,
		Requests: tr.children[4].innerText,
		Impact: tr.querySelector('td.impact').innerText,
		Suggestion: tr.querySelector('td.suggestion').innerText,
		Bars: tr.querySelectorAll('td.trend svg.spark rect.bucket').length,
	}))`, &rows)
	return rows
}

// callText is a problem's call as the UI writes it.
func callText(p problems.Problem) string {
	callee := strings.TrimSpace(p.CalleeService + " " + p.CalleeOperation)
	if p.CallerService == "" {
		return "entry: " + callee
	}
	return p.CallerService + " " + p.CallerOperation + " → " + callee
}

// kindText is a kind as the UI writes it: timeout_inversion → timeout inversion.
func kindText(k schema.Kind) string { return strings.ReplaceAll(string(k), "_", " ") }

// requireProblemRows checks the table shows want, in its order, row by row:
// what each problem is, its figures, its trend's buckets and its suggestion.
func requireProblemRows(t *testing.T, rows []problemRow, want []problems.Problem) {
	t.Helper()
	require.Len(t, rows, len(want))
	for i, p := range want {
		r := rows[i]
		require.Equal(t, p.ID, r.ID, "row %d holds the API's problem %d", i, i)
		require.Equal(t, string(p.Severity), r.Severity, p.ID)
		require.Equal(t, kindText(p.Kind), r.Kind, p.ID)
		require.Equal(t, callText(p), strings.Join(strings.Fields(r.Call), " "), p.ID)
		require.Equal(t, string(p.State), r.State, p.ID)
		require.Equal(t, strconv.Itoa(p.Occurrences), r.Occurrences, p.ID)
		require.Equal(t, strconv.Itoa(p.AffectedRequests), strings.Fields(r.Requests)[0], p.ID)
		require.Equal(t, p.Impact.String(), r.Impact, "%s: the impact as budgetd analyze writes it", p.ID)
		require.Equal(t, p.Suggestion, r.Suggestion, p.ID)
		require.Equal(t, len(p.Trend), r.Bars, "%s: a bar per trend bucket", p.ID)
	}
}

// hash is the page's location.hash.
func (u *uiSession) hash() string {
	u.t.Helper()
	var h string
	u.eval(`location.hash`, &h)
	return h
}

// testUIProblems checks the home page against GET /problems: the same
// problems in the same order, through the filters and the pages.
func testUIProblems(u *uiSession, ts *httptest.Server) {
	t := u.t
	var api problemsAPI
	require.Equal(t, 200, get(t, ts, "/api/v1/problems?limit=50", &api))
	require.Greater(t, len(api.Problems), 20, "the fixtures make a list worth paging")

	u.open("")
	require.Equal(t, "problems", u.page())
	require.Equal(t, "Problems", u.text("h1"))
	require.Equal(t, "Problems", u.text(`nav a[aria-current="page"]`))
	require.Equal(t, []string{"Problem", "Call", "State", "Occurrences", "Requests", "Impact", "Trend", "Suggestion"},
		u.texts("table.problems thead th"))
	require.Contains(t, u.text("table.problems caption"), "largest impact first, 2025-03-01 11:00:00 UTC to 2025-03-01 12:00:59 UTC")
	requireProblemRows(t, u.problemRows(), api.Problems)
	require.Equal(t, "138 s orphaned", u.problemRows()[0].Impact, "the fixtures' largest impact: seed 000's orphaned pricing work")

	// Page through with next, and back to the top.
	var first, second problemsAPI
	require.Equal(t, 200, get(t, ts, "/api/v1/problems?limit=10", &first))
	require.Equal(t, "10", first.Next)
	require.Equal(t, 200, get(t, ts, "/api/v1/problems?limit=10&next=10", &second))
	u.open("#/problems?limit=10")
	requireProblemRows(t, u.problemRows(), first.Problems)
	var perPage string
	u.eval(`document.querySelector('form.filters').elements.limit.value`, &perPage)
	require.Equal(t, "10", perPage, "the form shows a page size it does not offer when the URL asks for it")
	u.act(`document.querySelector('nav.pager a[rel="next"]').click()`)
	require.Equal(t, "#/problems?limit=10&next=10", u.hash())
	requireProblemRows(t, u.problemRows(), second.Problems)
	u.act(`[...document.querySelectorAll('nav.pager a')].find((a) => a.innerText.includes('Largest impact')).click()`)
	requireProblemRows(t, u.problemRows(), first.Problems)

	// Filter through the form, as a user would: the problem that came back
	// after a quiet period of hours.
	u.open("")
	u.act(`const f = document.querySelector('form.filters');
		f.elements.state.value = 'regressed';
		f.elements.since.value = '24h';
		f.requestSubmit()`)
	require.Equal(t, "#/problems?state=regressed&since=24h&limit=50", u.hash())
	var regressed problemsAPI
	require.Equal(t, 200, get(t, ts, "/api/v1/problems?state=regressed&since=24h&limit=50", &regressed))
	require.Len(t, regressed.Problems, 1)
	require.Equal(t, regressedCallee, regressed.Problems[0].CalleeService)
	requireProblemRows(t, u.problemRows(), regressed.Problems)
	require.Equal(t, 4, u.problemRows()[0].Bars, "four sightings, hours apart")
	require.Equal(t, "#/problems/"+regressed.Problems[0].ID+"?since=24h", u.problemRows()[0].Href,
		"a problem opens in the window it was listed in")

	for _, q := range []string{
		"state=resolved&since=24h", "kind=orphaned_work&service=gateway", "sort=occurrences", "sort=last_seen&since=24h",
	} {
		var want problemsAPI
		require.Equal(t, 200, get(t, ts, "/api/v1/problems?limit=50&"+q, &want))
		require.NotEmpty(t, want.Problems, q)
		u.open("#/problems?" + q)
		requireProblemRows(t, u.problemRows(), want.Problems)
	}
	require.Contains(t, u.text("table.problems caption"), "most recently seen first")

	u.open("#/problems?service=nosuch")
	require.Equal(t, "No problem matches these filters.", u.text("main p.empty"))

	// Eight hours hold the history: a resolved and a regressed problem with
	// their trends beside the fixtures' active ones.
	u.open("#/problems?since=8h&limit=20")
	var states []string
	for _, r := range u.problemRows() {
		states = append(states, r.State)
	}
	require.Contains(t, states, "resolved")
	require.Contains(t, states, "regressed")
	u.screenshot("problems")
}

// testUIProblem opens a problem from the list and checks its page against
// GET /problems/{id}, then follows its example trace to the waterfall.
func testUIProblem(u *uiSession, ts *httptest.Server) {
	t := u.t
	u.open("")
	id := u.problemRows()[0].ID
	u.act(`document.querySelector('table.problems tbody tr a.problem-link').click()`)
	require.Equal(t, "problem", u.page())
	require.Equal(t, "#/problems/"+id, u.hash())
	require.Equal(t, "Problems", u.text(`nav a[aria-current="page"]`))
	var api problemAPI
	require.Equal(t, 200, get(t, ts, "/api/v1/problems/"+id, &api))
	requireProblemPage(u, api)
	require.Equal(t, "Orphaned work: order → pricing", u.text("h1"))

	// An example trace opens the waterfall.
	ex := api.Problem.Examples[0]
	u.act(`document.querySelector('ol.examples a.trace-link').click()`)
	require.Equal(t, "trace", u.page())
	require.Contains(t, u.text("h1"), ex)
	require.Positive(t, u.count("table.waterfall tbody tr"))

	// The worst evidence opens its trace with its finding selected.
	u.open("#/problems/" + id)
	u.act(`document.querySelector('a.worst-link').click()`)
	require.Equal(t, "trace", u.page())
	require.Contains(t, u.text("h1"), api.Problem.Worst.TraceID)
	require.Equal(t, api.Problem.Worst.FindingID, u.attr("li.finding.is-selected", "data-finding-id"))
	require.Equal(t, 1, u.count("tr.span.is-selected"))

	// The regressed problem over the day: its trend shows the silence.
	var regressed problemsAPI
	require.Equal(t, 200, get(t, ts, "/api/v1/problems?state=regressed&since=24h", &regressed))
	require.Len(t, regressed.Problems, 1)
	var rp problemAPI
	require.Equal(t, 200, get(t, ts, "/api/v1/problems/"+regressed.Problems[0].ID+"?since=8h", &rp))
	u.open("#/problems/" + rp.Problem.ID + "?since=8h")
	requireProblemPage(u, rp)
	require.Len(t, rp.Problem.Trend, 4)
	u.screenshot("problem")

	// A resolved problem is not in the default window, as when a
	// notification links to it; the page offers a longer look back.
	var resolved problemsAPI
	require.Equal(t, 200, get(t, ts, "/api/v1/problems?state=resolved&since=24h", &resolved))
	require.Len(t, resolved.Problems, 1)
	require.NoError(t, u.tab.navigate(u.ctx, "about:blank"))
	require.NoError(t, u.tab.navigate(u.ctx, u.base+"#/problems/"+resolved.Problems[0].ID))
	require.NoError(t, u.tab.waitFor(u.ctx, `document.body.dataset.state === 'ready' && document.body.dataset.route === location.hash`))
	u.tab.b.takeProblems() // the API's 404 is the point here
	require.Equal(t, "Problem not in this window", u.text("h1"))
	u.act(`[...document.querySelectorAll('main a')].find((a) => a.innerText === 'Last 24 hours').click()`)
	require.Equal(t, "#/problems/"+resolved.Problems[0].ID+"?since=24h", u.hash())
	require.Equal(t, "resolved", u.text(".badges-line .badge:nth-child(2)"))
}

// requireProblemPage checks a problem page shows the API's answer.
func requireProblemPage(u *uiSession, api problemAPI) {
	t := u.t
	t.Helper()
	p := api.Problem
	require.Equal(t, p.ID, u.attr("section.page-problem", "data-problem-id"))
	require.Equal(t, []string{string(p.Severity), string(p.State)}, u.texts(".badges-line .badge"))
	require.Equal(t, p.Suggestion, u.text("p.suggestion"))
	require.Contains(t, u.text("dl.summary"), p.Impact.String())
	var paths []string
	u.eval(`[...document.querySelectorAll('.problem-paths li')].map((li) => li.dataset.path)`, &paths)
	require.Equal(t, api.Paths, paths, "the affected paths, as the API lists them")
	var keys []string
	for k := range p.Worst.Evidence {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	require.Equal(t, keys, u.texts("dl.evidence-list dt"))
	require.Equal(t, len(p.Trend), u.count("svg.trend-chart rect.bucket"), "a bar per trend bucket")
	require.Equal(t, len(p.Trend), u.count("details.trend-counts tbody tr"))
	var examples []string
	u.eval(`[...document.querySelectorAll('ol.examples a.trace-link')].map((a) => a.getAttribute('href'))`, &examples)
	require.Len(t, examples, len(p.Examples))
	for i, id := range p.Examples {
		require.Equal(t, "#/trace/"+id, examples[i])
	}
	var rows []string
	u.eval(`[...document.querySelectorAll('table.findings tbody tr')].map((tr) => tr.dataset.findingId)`, &rows)
	var want []string
	for _, f := range api.Findings {
		want = append(want, f.ID)
	}
	require.Equal(t, want, rows, "the findings of the example traces")
}

// servicePair is a caller → callee service pair of the service map.
type servicePair struct{ caller, callee string }

// testUIServiceMap checks the map against GET /edges and GET /problems:
// a node per service, an arrow per caller → callee service pair, coloured
// by its worst active or regressed problem.
func testUIServiceMap(u *uiSession, ts *httptest.Server) {
	t := u.t
	for _, win := range []string{"", "since=24h"} {
		var edges struct{ Edges []edgeJSON }
		require.Equal(t, 200, get(t, ts, "/api/v1/edges?limit=1000&"+win, &edges))
		var all problemsAPI
		require.Equal(t, 200, get(t, ts, "/api/v1/problems?limit=1000&"+win, &all))
		services := map[string]bool{}
		ops := map[servicePair][]edgeJSON{}
		for _, e := range edges.Edges {
			services[e.CallerService], services[e.CalleeService] = true, true
			k := servicePair{e.CallerService, e.CalleeService}
			ops[k] = append(ops[k], e)
		}
		rank := map[schema.Severity]int{schema.SeverityCritical: 3, schema.SeverityWarning: 2, schema.SeverityInfo: 1}
		worst := map[servicePair]schema.Severity{}
		active := map[servicePair][]string{}
		for _, p := range all.Problems {
			if p.State != problems.StateActive && p.State != problems.StateRegressed {
				continue
			}
			k := servicePair{p.CallerService, p.CalleeService}
			active[k] = append(active[k], p.ID)
			if rank[p.Severity] > rank[worst[k]] {
				worst[k] = p.Severity
			}
		}

		u.open("#/service-map?" + win)
		require.Equal(t, "Service map", u.text("h1"))
		require.Equal(t, "Service map", u.text(`nav a[aria-current="page"]`))
		var nodes []string
		u.eval(`[...document.querySelectorAll('svg.service-map a.node')].map((a) => a.dataset.service)`, &nodes)
		require.Len(t, nodes, len(services), "one node per service")
		for _, n := range nodes {
			require.True(t, services[n], "node %q is a service of the edges", n)
		}
		var drawn []struct{ Caller, Callee, Class, Title, Count string }
		u.eval(`[...document.querySelectorAll('svg.service-map a.edge')].map((a) => ({
			Caller: a.dataset.caller, Callee: a.dataset.callee, Class: a.getAttribute('class'),
			Title: a.querySelector('title').textContent, Count: (a.querySelector('.count text') || {textContent: ''}).textContent,
		}))`, &drawn)
		require.Len(t, drawn, len(ops), "one arrow per caller → callee service pair")
		classes := map[string]int{}
		for _, d := range drawn {
			k := servicePair{d.Caller, d.Callee}
			require.Contains(t, ops, k, "%s → %s is a pair of the edges", d.Caller, d.Callee)
			want := "worst-none"
			if w, ok := worst[k]; ok {
				want = "worst-" + string(w)
			}
			require.Contains(t, strings.Fields(d.Class), want, "%s → %s", d.Caller, d.Callee)
			classes[want]++
			if n := len(active[k]); n > 0 {
				require.Equal(t, strconv.Itoa(n), d.Count, "%s → %s counts its active problems", d.Caller, d.Callee)
			} else {
				require.Empty(t, d.Count)
			}
			// The hover: caller timeout against callee p99, per operation.
			for _, e := range ops[k] {
				require.Contains(t, d.Title, e.CallerOperation+" → "+e.CalleeOperation+": caller timeout ")
			}
			require.Contains(t, d.Title, " vs callee p99 ")
		}
		require.Positive(t, classes["worst-critical"])
		require.Positive(t, classes["worst-warning"], "web → search: a warning, active (1 h) or regressed (24 h)")
		require.Positive(t, classes["worst-info"], "web → gateway: info")
		if win != "" {
			require.Positive(t, classes["worst-none"], "order → ledger: its problem is resolved")
			require.Contains(t, strings.Fields(edgeClass(u, resolvedCaller, resolvedCallee)), "worst-none")
			require.Contains(t, strings.Fields(edgeClass(u, regressedCaller, regressedCallee)), "worst-warning")
		}
		require.Equal(t, len(ops), u.count("table.map-pairs tbody tr"))
	}

	// Hover text and click panel of one call: seed 000's order → pricing.
	u.open("#/service-map")
	var title string
	u.eval(`document.querySelector('svg.service-map a.edge[data-caller="order"][data-callee="pricing"] title').textContent`, &title)
	require.Contains(t, title, "POST /order → POST /price: caller timeout 20 s vs callee p99 42.02 s")
	u.act(`document.querySelector('svg.service-map a.edge[data-caller="order"][data-callee="pricing"]')
		.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true}))`)
	require.Equal(t, "#/service-map?caller=order&callee=pricing", u.hash())
	requireMapPanel(u, ts, "", "order", "pricing")
	require.Contains(t, u.attr(`svg.service-map a.edge[data-caller="order"][data-callee="pricing"]`, "class"), "is-selected")

	// The selection is in the URL: the map opens with it.
	u.open("#/service-map?since=24h&caller=order&callee=pricing")
	requireMapPanel(u, ts, "since=24h", "order", "pricing")
	u.screenshot("service-map")

	// A service opens its problems.
	u.act(`document.querySelector('svg.service-map a.node[data-service="pricing"]')
		.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true}))`)
	require.Equal(t, "#/problems?since=24h&service=pricing", u.hash())
	var pricing problemsAPI
	require.Equal(t, 200, get(t, ts, "/api/v1/problems?since=24h&service=pricing&limit=50", &pricing))
	requireProblemRows(t, u.problemRows(), pricing.Problems)
}

// edgeClass is the class attribute of the map's arrow from caller to callee.
func edgeClass(u *uiSession, caller, callee string) string {
	u.t.Helper()
	return u.attr(fmt.Sprintf(`svg.service-map a.edge[data-caller=%q][data-callee=%q]`, caller, callee), "class")
}

// requireMapPanel checks the detail panel shows the call's operations and
// its active problems.
func requireMapPanel(u *uiSession, ts *httptest.Server, win, caller, callee string) {
	t := u.t
	t.Helper()
	var edges struct{ Edges []edgeJSON }
	require.Equal(t, 200, get(t, ts, "/api/v1/edges?limit=1000&"+win, &edges))
	var all problemsAPI
	require.Equal(t, 200, get(t, ts, "/api/v1/problems?limit=1000&"+win, &all))
	require.Equal(t, caller+" → "+callee, u.text(".map-detail h2"))
	var rows []struct{ CallerOp, CalleeOp, Calls string }
	u.eval(`[...document.querySelectorAll('.map-detail table.pair-edges tbody tr')].map((tr) => ({
		CallerOp: tr.children[0].innerText, CalleeOp: tr.children[1].innerText, Calls: tr.children[2].innerText}))`, &rows)
	var want []struct{ CallerOp, CalleeOp, Calls string }
	for _, e := range edges.Edges {
		if e.CallerService == caller && e.CalleeService == callee {
			want = append(want, struct{ CallerOp, CalleeOp, Calls string }{e.CallerOperation, e.CalleeOperation, strconv.FormatUint(e.Calls, 10)})
		}
	}
	require.Equal(t, want, rows)
	var ids []string
	u.eval(`[...document.querySelectorAll('.map-detail .pair-problems li')].map((li) => li.dataset.problemId)`, &ids)
	var wantIDs []string
	for _, p := range all.Problems {
		if p.CallerService == caller && p.CalleeService == callee && p.State != problems.StateResolved {
			wantIDs = append(wantIDs, p.ID)
		}
	}
	require.NotEmpty(t, wantIDs)
	require.ElementsMatch(t, wantIDs, ids)
}
