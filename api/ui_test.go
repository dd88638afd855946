package api

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/analyze"
	"github.com/budgetd/budgetd/api/ui"
	"github.com/budgetd/budgetd/ingest"
	"github.com/budgetd/budgetd/schema"
	"github.com/budgetd/budgetd/store"
)

var updateScreenshots = flag.Bool("update-screenshots", false,
	"write docs/img/{problems,problem,service-map,findings,paths,edges,trace}.png from TestUIInBrowser")

// The traces the UI test opens, from the fixtures.
const (
	seed000Trace   = "ab0000000000000000000000000003e9" // seed000_independent_timeouts: retries 2 × 2 × 3, orphaned work
	seed002Trace   = "ab0000000000000000000000000003ec" // seed002_unfunded_retry: budgets, a retry, a reset
	cancelledTrace = "ab0000000000000000000000000001fa" // orphaned_work_cancelled: a budget.cancelled event
	inferredTrace  = "ab000000000000000000000000000067" // timeout_inversion_header_budget: budget from a header
	seed000Path    = "mobile:checkout > gateway:POST /checkout > order:POST /order > pricing:POST /price > db:SELECT prices"
	zeroTrace      = "cc000000000000000000000000000006" // loadZeroInstrumented: the last of its traces
)

// uiViewport is the browser window of the test and of the screenshots.
const uiViewportWidth, uiViewportHeight = 1360, 900

// TestUIInBrowser runs the web UI in headless Chromium against the API on
// the embedded store with the fixtures loaded, page by page: each renders
// the fixture data with no console error, no exception and no failed load.
func TestUIInBrowser(t *testing.T) {
	b := startBrowser(t) // first: a missing browser fails before any setup
	st := embeddedStore(t)
	loadFixtures(t, st)
	loadFixtureFiles(t, st, "orphaned_work_cancelled", "timeout_inversion_header_budget")
	loadZeroInstrumented(t, st)
	loadProblemHistory(t, st)
	ts := newTestServer(t, st)

	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	tb, err := b.newTab(ctx, uiViewportWidth, uiViewportHeight)
	require.NoError(t, err)
	u := &uiSession{t: t, ctx: ctx, tab: tb, base: ts.URL + "/"}

	t.Run("problems", func(t *testing.T) { u.t = t; testUIProblems(u, ts) })
	t.Run("problem", func(t *testing.T) { u.t = t; testUIProblem(u, ts) })
	t.Run("service map", func(t *testing.T) { u.t = t; testUIServiceMap(u, ts) })
	t.Run("findings", func(t *testing.T) { u.t = t; testUIFindings(u, ts) })
	t.Run("paths", func(t *testing.T) { u.t = t; testUIPaths(u) })
	t.Run("edges", func(t *testing.T) { u.t = t; testUIEdges(u, ts) })
	t.Run("trace", func(t *testing.T) { u.t = t; testUITrace(u, ts) })
	t.Run("hostile span data stays text", func(t *testing.T) { u.t = t; testUIHostile(u, st) })
	t.Run("a partial trace says so", func(t *testing.T) { u.t = t; testUIPartialTrace(u, st) })
}

// testUIPartialTrace opens a trace larger than the API answers (20 spans
// of a 2 MiB resource against 32 MiB): the page says it is partial and
// draws the spans it got.
func testUIPartialTrace(u *uiSession, st store.Store) {
	var id schema.TraceID
	id[0], id[15] = 0x7f, 2
	writeLargeTrace(u.t, st, id)
	u.open("#/trace/" + id.String())
	require.Equal(u.t, "Partial trace: showing the first 15 spans: the trace holds more than 20000 spans or 32 MiB of span data.", u.text("p.truncated"))
	require.Equal(u.t, 15, u.count("table.waterfall tbody tr"))
}

// uiSession is the browser tab of TestUIInBrowser and what it needs to
// drive it.
type uiSession struct {
	t    *testing.T
	ctx  context.Context
	tab  *tab
	base string
}

// open loads the UI at hash from scratch and waits until the page has
// rendered it. It fails on an error page.
func (u *uiSession) open(hash string) {
	u.t.Helper()
	require.NoError(u.t, u.tab.navigate(u.ctx, "about:blank"))
	require.NoError(u.t, u.tab.navigate(u.ctx, u.base+hash))
	u.settled()
}

// settled waits until the page has rendered the current hash, then checks
// it is not an error page and that the browser reported nothing wrong.
func (u *uiSession) settled() {
	u.t.Helper()
	require.NoError(u.t, u.tab.waitFor(u.ctx,
		`document.body && document.body.dataset.state !== 'loading' && document.body.dataset.route === location.hash`))
	var state struct {
		State string `json:"state"`
		Main  string `json:"main"`
	}
	u.eval(`({state: document.body.dataset.state, main: document.querySelector('main').innerText})`, &state)
	require.Equal(u.t, "ready", state.State, "the page shows an error:\n%s", state.Main)
	u.noProblems()
}

// noProblems fails on console errors, exceptions and failed loads.
func (u *uiSession) noProblems() {
	u.t.Helper()
	require.Empty(u.t, u.tab.b.takeProblems(), "the browser reported problems")
}

func (u *uiSession) eval(expr string, out any) {
	u.t.Helper()
	require.NoError(u.t, u.tab.eval(u.ctx, expr, out))
}

// act runs JavaScript that navigates (a click, a form submit) and waits for
// the page it leads to.
func (u *uiSession) act(js string) {
	u.t.Helper()
	u.eval(`(() => { `+js+` })()`, nil)
	u.settled()
}

func (u *uiSession) text(selector string) string {
	u.t.Helper()
	var s string
	u.eval(fmt.Sprintf(`(document.querySelector(%q) || {innerText: ''}).innerText`, selector), &s)
	return s
}

func (u *uiSession) texts(selector string) []string {
	u.t.Helper()
	var s []string
	u.eval(fmt.Sprintf(`[...document.querySelectorAll(%q)].map((e) => e.innerText)`, selector), &s)
	return s
}

func (u *uiSession) attr(selector, name string) string {
	u.t.Helper()
	var s string
	u.eval(fmt.Sprintf(`(document.querySelector(%q) || {getAttribute: () => ''}).getAttribute(%q) || ''`, selector, name), &s)
	return s
}

func (u *uiSession) count(selector string) int {
	u.t.Helper()
	var n int
	u.eval(fmt.Sprintf(`document.querySelectorAll(%q).length`, selector), &n)
	return n
}

// screenshot keeps the page under docs/img/ when -update-screenshots is set.
func (u *uiSession) screenshot(name string) {
	u.t.Helper()
	if !*updateScreenshots {
		return
	}
	png, err := u.tab.screenshot(u.ctx, uiViewportWidth, 2400)
	require.NoError(u.t, err)
	dir := filepath.Join("..", "docs", "img")
	require.NoError(u.t, os.MkdirAll(dir, 0o755))
	require.NoError(u.t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
	require.NoError(u.t, u.tab.setViewport(u.ctx, uiViewportWidth, uiViewportHeight))
	u.t.Logf("wrote docs/img/%s.png (%d bytes)", name, len(png))
}

func testUIFindings(u *uiSession, ts *httptest.Server) {
	t := u.t
	u.open("#/findings")
	require.Equal(t, "Findings", u.text("h1"))
	require.Equal(t, "Findings", u.text(`nav a[aria-current="page"]`))
	require.Equal(t, 50, u.count("table.findings tbody tr"), "the first page holds the default 50")
	require.Equal(t, []string{"Severity", "Kind", "Finding", "Service", "Path", "Detected"}, u.texts("table.findings thead th"))

	// Filter through the form, as a user would.
	u.act(`const f = document.querySelector('form.filters');
		f.elements.kind.value = 'retry_amplification';
		f.elements.service.value = 'db';
		f.requestSubmit()`)
	var hash string
	u.eval(`location.hash`, &hash)
	require.Equal(t, "#/findings?kind=retry_amplification&service=db&limit=50", hash)
	kinds := u.texts("table.findings tbody td:nth-child(2)")
	require.NotEmpty(t, kinds)
	for _, k := range kinds {
		require.Equal(t, "retry amplification", k)
	}
	require.Contains(t, u.text("table.findings tbody"), "db was called 12 times for one mobile request")
	require.Zero(t, u.count("table.findings tbody .badge.inferred"), "retry amplification rests on recorded attempts only")

	// Findings that rest on an inferred timeout or deadline are marked, with
	// their confidence; findings on recorded figures are not.
	testUIInferredFindings(u, ts)

	// One service's findings make the picture: every kind of problem shows.
	u.open("#/findings?service=order")
	require.Contains(t, u.texts("table.findings tbody td:nth-child(4)"), "gateway → order")
	u.screenshot("findings")

	// Page through with next, then back to the newest.
	u.open("#/findings?limit=25")
	first := u.texts("table.findings tbody tr")
	require.Len(t, first, 25)
	u.act(`document.querySelector('nav.pager a[rel="next"]').click()`)
	second := u.texts("table.findings tbody tr")
	require.Len(t, second, 25)
	require.NotEqual(t, first, second)
	require.Contains(t, u.text("nav.pager"), "Newest")

	// Opening a finding opens its trace with the finding selected. The
	// path holds several findings of the trace (inferred ones too), so pick
	// the retry amplification by its message, not by its place in the list.
	u.open("#/findings?path=" + encodeHashParam(seed000Path))
	var findingID string
	u.eval(`(() => {
		const a = [...document.querySelectorAll('a.finding-link[href*="`+seed000Trace+`"]')]
			.find((a) => a.innerText.startsWith('db was called 12 times'));
		return a ? a.closest('tr').dataset.findingId : '';
	})()`, &findingID)
	require.NotEmpty(t, findingID, "the path's findings list the retry amplification of trace %s", seed000Trace)
	u.act(`document.querySelector('tr[data-finding-id="` + findingID + `"] a.finding-link').click()`)
	require.Equal(t, "trace", u.page())
	require.Contains(t, u.text("h1"), seed000Trace)
	require.Equal(t, 1, u.count("li.finding.is-selected"))
	require.Equal(t, findingID, u.attr("li.finding.is-selected", "data-finding-id"))
	require.Contains(t, u.text("li.finding.is-selected"), "db was called 12 times")
	require.Equal(t, 1, u.count("tr.span.is-selected"), "the finding's span is highlighted")
}

// testUIInferredFindings checks the timeout inversions page row by row
// against the API: a row has the inferred badge exactly when its finding's
// evidence says inferred, and the badge gives the confidence.
func testUIInferredFindings(u *uiSession, ts *httptest.Server) {
	t := u.t
	var api struct{ Findings []schema.Finding }
	require.Equal(t, 200, get(t, ts, "/api/v1/findings?kind=timeout_inversion&limit=250", &api))
	u.open("#/findings?kind=timeout_inversion&limit=250")
	type row struct {
		ID, Kind, Message, Badge, Title string
	}
	var rows []row
	u.eval(`[...document.querySelectorAll('table.findings tbody tr')].map((tr) => {
		const b = tr.querySelector('td:nth-child(2) .badge.inferred.timing');
		return {ID: tr.dataset.findingId, Kind: tr.children[1].innerText, Message: tr.children[2].innerText,
			Badge: b ? b.innerText : '', Title: b ? b.title : ''};
	})`, &rows)
	require.Len(t, rows, len(api.Findings))
	byID := map[string]schema.Finding{}
	for _, f := range api.Findings {
		byID[f.ID] = f
	}
	inferred, recorded, partial := 0, 0, 0
	for _, r := range rows {
		f, ok := byID[r.ID]
		require.True(t, ok, "row %s is a finding of the API", r.ID)
		if f.Evidence["inferred"] != 1 {
			recorded++
			require.Empty(t, r.Badge, "finding %q rests on recorded figures", f.Message)
			require.Equal(t, "timeout inversion", r.Kind)
			continue
		}
		inferred++
		conf := f.Evidence["confidence"]
		require.Equal(t, fmt.Sprintf("inferred · %d %%", int(conf*100+0.5)), r.Badge, "finding %q", f.Message)
		require.Equal(t, fmt.Sprintf("Worked out from span timing: a timeout or deadline the spans did not record (confidence %.2f)", conf), r.Title)
		require.Equal(t, "timeout inversion "+r.Badge, r.Kind)
		if conf < 1 {
			partial++
		}
	}
	require.Positive(t, recorded, "recorded timeout inversions are listed too")
	require.Positive(t, inferred)
	require.Positive(t, partial, "the zero-instrumented traces give a confidence below 1")
	// seed 000 records timeouts but no budget: its deadlines are inferred.
	found := false
	for _, r := range rows {
		if byID[r.ID].TraceID == seed000Trace && strings.Contains(r.Message, "were left before a caller above stopped waiting") {
			found = true
			require.Regexp(t, `^inferred · \d+ %$`, r.Badge, "%s", r.Message)
		}
	}
	require.True(t, found, "seed 000's inferred timeout inversions are listed")
}

func (u *uiSession) page() string {
	var p string
	u.eval(`document.body.dataset.page`, &p)
	return p
}

func testUIPaths(u *uiSession) {
	t := u.t
	u.open("#/paths")
	var rows []struct {
		Path, MaxCalls, Orphaned string
	}
	u.eval(`[...document.querySelectorAll('table.paths tbody tr')].map((tr) => ({
		Path: tr.querySelector('.path').title,
		MaxCalls: tr.children[7].innerText,
		Orphaned: tr.children[6].className,
	}))`, &rows)
	require.NotEmpty(t, rows)
	found := false
	for _, r := range rows {
		if r.Path == seed000Path {
			found = true
			require.Equal(t, "12", r.MaxCalls, "seed 000: 2 × 2 × 3 database calls in one checkout")
		}
	}
	require.True(t, found, "the seed 000 database path is listed")
	require.Positive(t, u.count("table.paths td.orphaned"), "orphaned work is highlighted")
	require.Contains(t, u.text("table.paths caption"), "2025-03-01")
	require.Contains(t, u.text("dl.summary"), "Goodput")
	u.screenshot("paths")

	// Sorting by a column orders the rows by it.
	u.eval(`[...document.querySelectorAll('table.paths thead button')].find((b) => b.innerText.startsWith('Requests')).click()`, nil)
	require.Equal(t, "descending", u.attr(`table.paths thead th[aria-sort]`, "aria-sort"))
	var requests []string
	u.eval(`[...document.querySelectorAll('table.paths tbody tr')].map((tr) => tr.children[1].innerText)`, &requests)
	require.Equal(t, "40", requests[0], "the busiest path first")
}

func testUIEdges(u *uiSession, ts *httptest.Server) {
	t := u.t
	var api struct{ Edges []edgeJSON }
	require.Equal(t, 200, get(t, ts, "/api/v1/edges?limit=1000", &api))
	inverted := 0
	for _, e := range api.Edges {
		if e.Inversion {
			inverted++
		}
	}
	require.Positive(t, inverted)

	u.open("#/edges")
	require.Equal(t, len(api.Edges), u.count("table.edges tbody tr"))
	require.Equal(t, inverted, u.count("table.edges tbody tr.inverted"))
	require.Equal(t, 1, u.count("svg.scatter"))
	require.Positive(t, u.count("svg.scatter .point.inverted"), "inversions are drawn as their own marks")
	require.Positive(t, u.count("svg.scatter .point.ok"))
	require.Contains(t, u.text("p.callout"), fmt.Sprintf("%d of %d edges are inverted", inverted, len(api.Edges)))

	// Edges whose calls recorded no timeout show the inferred one, marked
	// with its confidence, in the table and as hollow marks in the chart.
	var rows []struct {
		Caller, Callee, Timeout, Badge, Title string
	}
	u.eval(`[...document.querySelectorAll('table.edges tbody tr')].map((tr) => {
		const b = tr.children[4].querySelector('.badge.inferred.timing');
		return {Caller: tr.children[1].innerText, Callee: tr.children[2].innerText, Timeout: tr.children[4].innerText,
			Badge: b ? b.innerText : '', Title: b ? b.title : ''};
	})`, &rows)
	require.Len(t, rows, len(api.Edges))
	inferredEdges := 0
	for i, e := range api.Edges { // the table lists the edges in the API's order
		r := &rows[i]
		require.Contains(t, r.Caller, e.CallerService)
		require.Contains(t, r.Callee, e.CalleeService)
		if e.CallerMedianTimeoutMs == nil && e.InferredTimeoutMs != nil {
			inferredEdges++
			require.True(t, strings.HasPrefix(r.Timeout, "≈ "), "%+v", *r)
			require.Equal(t, fmt.Sprintf("inferred · %d %%", int(e.InferredTimeoutConfidence*100+0.5)), r.Badge)
			require.Contains(t, r.Title, fmt.Sprintf("(confidence %.2f)", e.InferredTimeoutConfidence))
		} else {
			require.Empty(t, r.Badge, "edge %s → %s has a recorded timeout or none", e.CallerService, e.CalleeService)
		}
	}
	require.Positive(t, inferredEdges, "the zero-instrumented traces give edges with inferred timeouts")
	require.Equal(t, inferredEdges, u.count("table.edges tbody .badge.inferred.timing"))
	require.Positive(t, u.count("svg.scatter .point.inferred"), "inferred timeouts are drawn as their own marks")
	u.screenshot("edges")
}

// traceAPI is GET /api/v1/traces/{id}.
type traceAPI struct {
	Spans    []spanJSON       `json:"spans"`
	Findings []schema.Finding `json:"findings"`
}

func testUITrace(u *uiSession, ts *httptest.Server) {
	t := u.t
	for _, id := range []string{seed000Trace, seed002Trace} {
		var tr traceAPI
		require.Equal(t, 200, get(t, ts, "/api/v1/traces/"+id, &tr))
		u.open("#/trace/" + id)
		require.Contains(t, u.text("h1"), id)
		require.Equal(t, len(tr.Spans), u.count("table.waterfall tbody tr"))
		names := strings.Join(u.texts("table.waterfall tbody .span-name"), "\n")
		orphaned, retries, gaveUp := 0, 0, 0
		for _, s := range tr.Spans {
			require.Contains(t, names, s.Service+" "+s.Name)
			require.NotNil(t, s.Budget, "span %s is analysed", s.SpanID)
			if s.Budget.OrphanedMs > 0 {
				orphaned++
			}
			if s.Budget.Attempt > 1 {
				retries++
			}
			if s.Budget.TimedOut {
				gaveUp++
			}
		}
		require.Positive(t, orphaned)
		require.Equal(t, orphaned, u.count("svg.lane rect.orphaned"), "each orphaned stretch is drawn")
		require.Equal(t, orphaned, u.count("tr.has-orphaned"))
		require.Equal(t, retries, u.count(".badge.retry"), "each retry is marked")
		require.Equal(t, gaveUp, u.count("svg.lane line.gaveup"), "each caller that gave up is marked")
		messages := u.text("section.trace-findings")
		for _, f := range tr.Findings {
			require.Contains(t, messages, f.Message)
		}
		require.Equal(t, len(tr.Findings), u.count("section.trace-findings li"))
		requireInferredMarks(u, tr)
	}
	// seed 002 carries budgets: deadlines and budget bars are drawn.
	require.Positive(t, u.count("svg.lane line.deadline"))
	require.Positive(t, u.count("svg.lane rect.budget"))
	require.Positive(t, u.count("svg.lane line.timeout"))
	// Show a finding's span from the list, then keep the page as the picture.
	u.eval(`document.querySelectorAll('section.trace-findings button.link')[0].click()`, nil)
	require.Equal(t, 1, u.count("tr.span.is-selected"))
	u.noProblems()
	u.screenshot("trace")

	u.open("#/trace/" + cancelledTrace)
	require.Equal(t, 1, u.count("svg.lane line.gaveup.cancelled"), "the budget.cancelled event is the moment the caller gave up")
	require.Positive(t, u.count("svg.lane rect.orphaned"))

	u.open("#/trace/" + inferredTrace)
	require.Positive(t, u.count(".badge.inferred"), "a budget known only from a header is marked inferred")
	require.Contains(t, u.text("table.waterfall tbody"), "≈")

	// A trace without any budget attribute: the timeouts and deadlines are
	// all inferred from timing, shown with a ≈ and marked in every place.
	var zt traceAPI
	require.Equal(t, 200, get(t, ts, "/api/v1/traces/"+zeroTrace, &zt))
	u.open("#/trace/" + zeroTrace)
	requireInferredMarks(u, zt)
	require.Positive(t, u.count("svg.lane line.timeout.inferred"), "inferred timeouts are drawn")
	require.Positive(t, u.count("svg.lane line.deadline.inferred"), "inferred deadlines are drawn")
	require.Zero(t, u.count("svg.lane line.timeout:not(.inferred)"), "no timeout was recorded")
	var conf float64
	for _, s := range zt.Spans {
		if s.Budget.InferredTimeoutMs != nil {
			conf = s.Budget.InferenceConfidence
		}
	}
	require.True(t, conf > 0 && conf < 1, "six samples: an estimate, not a certainty")
	require.Contains(t, u.texts("table.waterfall tbody .badge.inferred.timing"), fmt.Sprintf("inferred · %d %%", int(conf*100+0.5)))
	require.Contains(t, u.text("table.waterfall tbody"), "≈")
	require.Positive(t, u.count("section.trace-findings li .badge.inferred.timing"))

	// A trace that is not there is an error page, not an exception.
	require.NoError(t, u.tab.navigate(u.ctx, u.base+"#/trace/0123456789abcdef0123456789abcdef"))
	require.NoError(t, u.tab.waitFor(u.ctx, `document.body.dataset.state === 'error'`))
	require.Contains(t, u.text("main"), "Trace 0123456789abcdef0123456789abcdef is not in the store")
	u.tab.b.takeProblems() // the 404 of the API call is the point here
}

// requireInferredMarks checks a trace page against its API answer: each
// finding resting on inferred figures, and each span showing an inferred
// timeout or remaining budget, carries the inferred badge; no other does.
func requireInferredMarks(u *uiSession, tr traceAPI) {
	t := u.t
	t.Helper()
	inferredFindings := 0
	for _, f := range tr.Findings {
		if f.Evidence["inferred"] == 1 {
			inferredFindings++
		}
	}
	require.Equal(t, inferredFindings, u.count("section.trace-findings li .badge.inferred.timing"))
	inferredSpans, timeouts, remaining := 0, 0, 0
	for _, s := range tr.Spans {
		it := s.Budget.TimeoutMs == nil && s.Budget.InferredTimeoutMs != nil
		ir := s.Budget.RemainingMs == nil && s.Budget.InferredRemainingMs != nil
		if it || ir {
			inferredSpans++
		}
		if it {
			timeouts++
		}
		if ir {
			remaining++
		}
	}
	require.Equal(t, inferredSpans, u.count("table.waterfall tbody .span-name .badge.inferred.timing"))
	require.Equal(t, timeouts, u.count("table.waterfall tbody td:nth-child(4) .badge.inferred.timing"), "inferred timeouts")
	require.Equal(t, remaining, u.count("table.waterfall tbody td:nth-child(3) .badge.inferred.timing"), "inferred remaining budgets")
}

// testUIHostile stores a trace whose names, attributes and events are HTML
// and script, and checks every page shows them as text and runs none of it.
func testUIHostile(u *uiSession, st store.Store) {
	t := u.t
	const (
		img    = `<img src=x onerror="window.__pwned=1">`
		script = `<script>window.__pwned=2</script>`
	)
	var id schema.TraceID
	id[0], id[15] = 0xee, 0x01
	sp := func(n byte) schema.SpanID { return schema.SpanID{7: n} }
	base := uint64(detectedAt.Add(-10 * time.Minute).UnixNano())
	ms := uint64(time.Millisecond)
	spans := []schema.Span{
		{TraceID: id, SpanID: sp(1), Service: "edge" + script, Name: "GET /" + img, Kind: schema.KindServer,
			StartNs: base, EndNs: base + 3000*ms, Attrs: schema.Attributes{schema.Int(schema.AttrRemainingMs, 1000)}},
		{TraceID: id, SpanID: sp(2), ParentSpanID: sp(1), Service: "edge" + script, Name: img, Kind: schema.KindClient,
			StartNs: base + 10*ms, EndNs: base + 1010*ms, StatusCode: schema.StatusError, StatusMessage: script,
			Attrs: schema.Attributes{schema.Int(schema.AttrTimeoutMs, 1000), schema.Str("error.type", "timeout"),
				schema.Str("peer.service", "<b>callee</b>"), schema.Str("note"+img, script)}},
		{TraceID: id, SpanID: sp(3), ParentSpanID: sp(2), Service: "<b>callee</b>", Name: img, Kind: schema.KindServer,
			StartNs: base + 20*ms, EndNs: base + 2500*ms,
			Events: []schema.Event{{TimeNs: base + 500*ms, Name: schema.EventCancelled, Attrs: schema.Attributes{schema.Str(schema.AttrCancelSource, img)}}}},
	}
	writeAnalysed(t, st, "ui-hostile", spans)

	check := func() {
		t.Helper()
		var res struct {
			Pwned    bool `json:"pwned"`
			Injected int  `json:"injected"`
		}
		u.eval(`({pwned: window.__pwned !== undefined, injected: document.querySelectorAll('main img, main script, main b').length})`, &res)
		require.False(t, res.Pwned, "span data ran as script")
		require.Zero(t, res.Injected, "span data became elements")
	}
	u.open("#/trace/" + id.String())
	require.Contains(t, u.text("table.waterfall"), img)
	require.Contains(t, u.text("table.waterfall"), "<b>callee</b>")
	u.eval(`document.querySelectorAll('details.span-details').forEach((d) => { d.open = true })`, nil)
	require.Contains(t, u.text("table.waterfall"), script)
	check()
	u.open("#/findings?service=" + encodeHashParam("<b>callee</b>"))
	require.Contains(t, u.text("table.findings"), "<b>callee</b>")
	check()
	u.open("#/paths")
	require.Contains(t, u.text("table.paths"), img)
	check()
	u.open("#/edges")
	require.Contains(t, u.text("table.edges"), "<b>callee</b>")
	check()
	u.open("#/problems?service=" + encodeHashParam("<b>callee</b>"))
	require.Contains(t, u.text("table.problems"), "<b>callee</b>")
	check()
	u.act(`document.querySelector('table.problems a.problem-link').click()`)
	require.Contains(t, u.text("h1"), "<b>callee</b>")
	check()
	u.open("#/service-map")
	require.Contains(t, u.text("table.map-pairs"), "<b>callee</b>")
	var nodes []string
	u.eval(`[...document.querySelectorAll('svg.service-map a.node text')].map((t) => t.textContent)`, &nodes)
	require.Contains(t, nodes, "<b>callee</b>")
	check()
	u.noProblems()
}

// encodeHashParam escapes a value for the query part of the UI's hash.
func encodeHashParam(s string) string {
	return strings.NewReplacer("%", "%25", "&", "%26", "#", "%23", "+", "%2B", " ", "+", "<", "%3C", ">", "%3E").Replace(s)
}

// embeddedStore opens the embedded engine of engines().
func embeddedStore(t *testing.T) store.Store {
	t.Helper()
	for _, e := range engines() {
		if e.name == "embedded" {
			return e.open(t)
		}
	}
	t.Fatal("no embedded engine in engines()")
	return nil
}

// loadFixtureFiles writes more fixtures, analysed the way loadFixtures
// analyses its own, under batch tokens of their own.
func loadFixtureFiles(t *testing.T, st store.Store, names ...string) {
	t.Helper()
	conv, err := ingest.NewConverter(ingest.DefaultLimits())
	require.NoError(t, err)
	for _, name := range names {
		spans, err := ingest.ReadSpansFile(filepath.Join("..", "fixtures", name+".json"), conv)
		require.NoError(t, err)
		writeAnalysed(t, st, "ui-"+name, spans)
	}
}

// loadZeroInstrumented stores six requests through shop → cart → kv that
// record no budget attribute and no timeout, only that their calls timed
// out: shop gives up on cart after 1000 ms, cart waits 3000 ms for kv. They
// are analysed as one batch, so every call gets the timeouts budgetd infers
// from the durations (six samples: confidence 6/8 = 0.75).
func loadZeroInstrumented(t *testing.T, st store.Store) {
	t.Helper()
	base := uint64(detectedAt.Add(-10 * time.Minute).UnixNano())
	at := func(ms float64) uint64 { return base + uint64(ms*float64(time.Millisecond)) }
	timedOut := func(peer string) schema.Attributes {
		return schema.Attributes{schema.Str(schema.AttrErrorType, "timeout"), schema.Str("peer.service", peer)}
	}
	var spans []schema.Span
	var traces []*schema.Trace
	for n := byte(1); n <= 6; n++ {
		var id schema.TraceID
		id[0], id[15] = 0xcc, n
		sp := func(i byte) schema.SpanID { return schema.SpanID{6: n, 7: i} }
		jitter := float64(n%3) * 0.4
		start := float64(n) * 5000
		tr := []schema.Span{
			{TraceID: id, SpanID: sp(1), Service: "shop", Name: "GET /cart", Kind: schema.KindServer,
				StartNs: at(start), EndNs: at(start + 1020)},
			{TraceID: id, SpanID: sp(2), ParentSpanID: sp(1), Service: "shop", Name: "POST /cart", Kind: schema.KindClient,
				StartNs: at(start + 5), EndNs: at(start + 1005 + jitter), StatusCode: schema.StatusError, Attrs: timedOut("cart")},
			{TraceID: id, SpanID: sp(3), ParentSpanID: sp(2), Service: "cart", Name: "POST /cart", Kind: schema.KindServer,
				StartNs: at(start + 6), EndNs: at(start + 3020)},
			{TraceID: id, SpanID: sp(4), ParentSpanID: sp(3), Service: "cart", Name: "GET item", Kind: schema.KindClient,
				StartNs: at(start + 10), EndNs: at(start + 3010 + jitter), StatusCode: schema.StatusError, Attrs: timedOut("kv")},
		}
		spans = append(spans, tr...)
		traces = append(traces, schema.NewTrace(tr))
	}
	a := analyze.New(analyze.DefaultConfig())
	var hops []schema.Hop
	var findings []schema.Finding
	for _, res := range a.Traces(traces, detectedAt) {
		hops = append(hops, res.Hops...)
		findings = append(findings, res.Findings...)
	}
	findings = append(findings, a.EdgeFindings(detectedAt)...)
	ctx := context.Background()
	require.NoError(t, st.WriteSpans(ctx, "ui-zero-spans", spans))
	require.NoError(t, st.WriteHops(ctx, "ui-zero-hops", hops))
	require.NoError(t, st.WriteFindings(ctx, "ui-zero-findings", findings))
}

// writeAnalysed stores spans with their hops and findings.
func writeAnalysed(t *testing.T, st store.Store, token string, spans []schema.Span) {
	t.Helper()
	writeAnalysedAt(t, st, token, spans, detectedAt)
}

// writeAnalysedAt stores spans with their hops and findings, detected at at.
func writeAnalysedAt(t *testing.T, st store.Store, token string, spans []schema.Span, at time.Time) {
	t.Helper()
	ctx := context.Background()
	byTrace := map[schema.TraceID][]schema.Span{}
	for _, s := range spans {
		byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
	}
	a := analyze.New(analyze.DefaultConfig())
	var hops []schema.Hop
	var findings []schema.Finding
	for _, ts := range byTrace {
		res := a.Trace(schema.NewTrace(ts), at)
		hops = append(hops, res.Hops...)
		findings = append(findings, res.Findings...)
	}
	findings = append(findings, a.EdgeFindings(at)...)
	require.NoError(t, st.WriteSpans(ctx, token+"-spans", spans))
	require.NoError(t, st.WriteHops(ctx, token+"-hops", hops))
	require.NoError(t, st.WriteFindings(ctx, token+"-findings", findings))
}

// TestUIAssets checks how the UI is served and what its files may contain;
// it needs no browser.
func TestUIAssets(t *testing.T) {
	s, err := New(DefaultConfig(), Settings{Store: &blockingStore{}})
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)

	fetch := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := http.Get(ts.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(body)
	}
	tests := []struct {
		path, status, contentType, contains string
	}{
		{"/", "200 OK", "text/html; charset=utf-8", `<script type="module" src="ui/app.js">`},
		{"/ui/app.js", "200 OK", "text/javascript; charset=utf-8", "parseRoute"},
		{"/ui/style.css", "200 OK", "text/css; charset=utf-8", "--orphaned"},
		{"/ui/", "404 Not Found", "application/json; charset=utf-8", "not_found"},
		{"/ui/index.html", "404 Not Found", "application/json; charset=utf-8", "not_found"},
		{"/ui/nope.js", "404 Not Found", "application/json; charset=utf-8", "not_found"},
		{"/ui/../api_test.go", "404 Not Found", "application/json; charset=utf-8", "not_found"},
	}
	for _, tt := range tests {
		resp, body := fetch(tt.path)
		require.Equal(t, tt.status, resp.Status, tt.path)
		require.Equal(t, tt.contentType, resp.Header.Get("Content-Type"), tt.path)
		require.Contains(t, body, tt.contains, tt.path)
		if resp.StatusCode == 200 {
			require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'", tt.path)
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), tt.path)
		}
	}

	// Span data reaches the page only as text: no HTML parsing sinks, no
	// code from strings, nothing from another origin.
	forbidden := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|https?://|//cdn|@import|url\(http`)
	allowedURL := regexp.MustCompile(`http://www\.w3\.org/2000/svg`)
	files, err := fs.Glob(ui.FS(), "*")
	require.NoError(t, err)
	require.Contains(t, files, "index.html")
	for _, name := range files {
		b, err := fs.ReadFile(ui.FS(), name)
		require.NoError(t, err)
		src := allowedURL.ReplaceAllString(string(b), "")
		require.Empty(t, forbidden.FindAllString(src, -1), "%s", name)
	}

	// The kinds the findings filter offers are schema.Kinds.
	src, err := fs.ReadFile(ui.FS(), "format.js")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?s)export const KINDS = \[(.*?)\];`).FindSubmatch(src)
	require.NotNil(t, m, "format.js defines KINDS")
	var kinds []string
	require.NoError(t, json.Unmarshal([]byte("["+strings.ReplaceAll(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(m[1])), ",")), "'", `"`)+"]"), &kinds))
	var want []string
	for _, k := range schema.Kinds {
		want = append(want, string(k))
	}
	require.Equal(t, want, kinds)
}
