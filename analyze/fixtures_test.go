package analyze

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/budgetd/budgetd/schema"
)

// fixture is one OTLP/JSON input file under fixtures/, generated from span
// specs by `go test ./analyze -run TestGolden -update-fixtures`.
type fixture struct {
	name  string
	about string // what the fixture shows, for fixtures/README.md
	spans func() []schema.Span
}

// fixtures lists every fixture: per detector a positive, a negative and the
// edge cases, then the seed scenarios. Trace numbers are distinct across
// files so a fixture can be combined with others.
func fixtures() []fixture {
	gw := func(extra ...sp) []sp {
		return append([]sp{
			{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 995, attrs: attrs(rem(1000), source(schema.SourceEdge))},
			{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 990, attrs: attrs(tmo(850), peerSvc("order"))},
		}, extra...)
	}
	repeatTraces := func(first, n int, f func(n int) []schema.Span) []schema.Span {
		var out []schema.Span
		for i := 0; i < n; i++ {
			out = append(out, f(first+i)...)
		}
		return out
	}
	edge := func(latency, timeout float64, withServer bool) func(n int) []schema.Span {
		return func(n int) []schema.Span { return edgeTrace(n, latency, timeout, withServer).Spans }
	}
	return []fixture{
		{"timeout_inversion_positive", "a 2000 ms timeout with 900 ms left", func() []schema.Span {
			return build(101,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 990, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 950, attrs: attrs(tmo(2000), peerSvc("order"))})
		}},
		{"timeout_inversion_negative", "an 800 ms timeout with 900 ms left", func() []schema.Span {
			return build(102,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 990, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 900, attrs: attrs(tmo(800), peerSvc("order"))})
		}},
		{"timeout_inversion_header_budget", "the budget known only from an x-request-timeout-ms header", func() []schema.Span {
			return build(103,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 990, attrs: attrs(headerTimeoutMs("1000"))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 950, attrs: attrs(tmo(2000), peerSvc("order"))})
		}},
		{"timeout_inversion_grpc_timeout", "the budget known only from grpc-timeout metadata", func() []schema.Span {
			return build(104,
				sp{id: 1, svc: "pricing", name: "pricing.Pricing/Price", kind: server, start: 0, end: 990, attrs: attrs(grpcTimeout("1S"))},
				sp{id: 2, parent: 1, svc: "pricing", name: "SELECT prices", kind: client, start: 100, end: 950, attrs: attrs(tmo(15000), schema.Str("db.system.name", "postgresql"))})
		}},
		{"timeout_inversion_skew", "a callee host 10 s ahead, under a client that got its answer: corrected, no finding", func() []schema.Span {
			return build(105,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 600, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 500, attrs: attrs(tmo(900), peerSvc("order"))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 10000, end: 10400, attrs: attrs(rem(890))},
				sp{id: 4, parent: 3, svc: "order", name: "POST /price", kind: client, start: 10050, end: 10350, attrs: attrs(tmo(800), peerSvc("pricing"))})
		}},
		{"budget_reset_positive", "a hop that replaces 900 ms left with a 30 s default", func() []schema.Span {
			return build(201, gw(sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 110, end: 980, attrs: attrs(rem(30000), source(schema.SourceDefault))})...)
		}},
		{"budget_reset_negative", "a hop that propagates what is left", func() []schema.Span {
			return build(202, gw(sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 110, end: 980, attrs: attrs(rem(840), source(schema.SourcePropagated))})...)
		}},
		{"budget_reset_skew_tolerance", "a received budget 3 ms above what was left: inside the 5 ms tolerance", func() []schema.Span {
			return build(203, gw(sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 110, end: 980, attrs: attrs(rem(903))})...)
		}},
		{"budget_reset_missing_parent", "a reset whose caller is not in the trace: nothing to compare", func() []schema.Span {
			return build(204, sp{id: 3, parent: missing, svc: "order", name: "POST /order", kind: server, start: 110, end: 990, attrs: attrs(rem(30000), source(schema.SourceDefault))})
		}},
		{"unfunded_retry_policy_positive", "2 × 900 ms + 100 ms backoff with 1670 ms left", func() []schema.Span {
			return build(301,
				sp{id: 1, svc: "inventory", name: "GET /stock", kind: server, start: 0, end: 1690, attrs: attrs(rem(1700))},
				sp{id: 2, parent: 1, svc: "inventory", name: "SELECT stock", kind: client, start: 30, end: 930, status: schema.StatusError, attrs: attrs(tmo(900), maxAttempts(2), backoff(100), timedOut(), peerSvc("db"))},
				sp{id: 3, parent: 1, svc: "inventory", name: "SELECT stock", kind: client, start: 1030, end: 1200, attrs: attrs(tmo(900), maxAttempts(2), backoff(100), peerSvc("db"))})
		}},
		{"unfunded_retry_policy_negative", "2 × 780 ms + 100 ms backoff with 1670 ms left", func() []schema.Span {
			return build(302,
				sp{id: 1, svc: "inventory", name: "GET /stock", kind: server, start: 0, end: 1690, attrs: attrs(rem(1700))},
				sp{id: 2, parent: 1, svc: "inventory", name: "SELECT stock", kind: client, start: 30, end: 230, attrs: attrs(tmo(780), maxAttempts(2), backoff(100), peerSvc("db"))})
		}},
		{"unfunded_retry_policy_first_attempt_missing", "only the second attempt recorded: judged there", func() []schema.Span {
			return build(303,
				sp{id: 1, svc: "inventory", name: "GET /stock", kind: server, start: 0, end: 1690, attrs: attrs(rem(1700))},
				sp{id: 3, parent: 1, svc: "inventory", name: "SELECT stock", kind: client, start: 1030, end: 1200, attrs: attrs(tmo(900), maxAttempts(2), backoff(100), attempt(2), peerSvc("db"))})
		}},
		{"latency_inversion_positive", "20 calls, one of them 1200 ms, against a 1000 ms timeout", func() []schema.Span {
			return append(repeatTraces(401, 19, edge(900, 1000, true)), edge(1200, 1000, true)(420)...)
		}},
		{"latency_inversion_negative", "20 calls of 900 ms against a 1000 ms timeout", func() []schema.Span {
			return repeatTraces(421, 20, edge(900, 1000, true))
		}},
		{"latency_inversion_few_samples", "19 calls, too few to trust the p99", func() []schema.Span {
			return repeatTraces(441, 19, edge(1200, 1000, true))
		}},
		{"latency_inversion_uninstrumented_callee", "20 calls to a callee without spans, timing out", func() []schema.Span {
			return repeatTraces(461, 20, edge(1000, 1000, false))
		}},
		{"orphaned_work_positive", "a server running 2 s after its client timed out", func() []schema.Span {
			return build(501,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1010},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 1000, attrs: attrs(tmo(1000), timedOut(), peerSvc("order"))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 10, end: 3000})
		}},
		{"orphaned_work_negative", "a server inside its client", func() []schema.Span {
			return build(502,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1010},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 1000, attrs: attrs(peerSvc("order"))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 10, end: 990})
		}},
		{"orphaned_work_skew_inside_tolerance", "a 4 ms overrun after a timeout: under the tolerance", func() []schema.Span {
			return build(503,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1010},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 1000, attrs: attrs(timedOut(), peerSvc("order"))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 10, end: 1004})
		}},
		{"orphaned_work_skew_outside_tolerance", "a 200 ms overrun under a client that got its answer: skew, no finding", func() []schema.Span {
			return build(504,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1010},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 1000, attrs: attrs(peerSvc("order"))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 210, end: 1200})
		}},
		{"orphaned_work_gave_up", "the same 200 ms overrun under a client that gave up (504): orphaned, never corrected", func() []schema.Span {
			return build(505,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1010},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 1000, status: schema.StatusError, attrs: attrs(schema.Int(schema.AttrHTTPStatusCode, 504), peerSvc("order"))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 210, end: 1200})
		}},
		{"orphaned_work_cancelled", "work going on 1.5 s after a budget.cancelled event", func() []schema.Span {
			return build(506,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 3000},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 2990, attrs: attrs(peerSvc("order"))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 10, end: 2000, events: cancelledAt(500, "caller_disconnect")})
		}},
		{"orphaned_work_missing_parent", "a long server whose caller is not in the trace", func() []schema.Span {
			return build(507, sp{id: 3, parent: missing, svc: "order", name: "POST /order", kind: server, start: 10, end: 60000})
		}},
		{"expired_on_arrival_positive", "a request that arrives with a spent budget (-200 ms) and runs anyway", func() []schema.Span {
			return build(601,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 400},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 10, end: 390, attrs: attrs(peerSvc("order"))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 20, end: 380, attrs: attrs(rem(-200), source(schema.SourcePropagated))})
		}},
		{"expired_on_arrival_negative", "an expired request that was rejected", func() []schema.Span {
			return build(602, sp{id: 3, parent: missing, svc: "order", name: "POST /order", kind: server, start: 0, end: 1, attrs: attrs(rem(-5), schema.Bool(schema.AttrRejected, true))})
		}},
		{"expired_on_arrival_after_caller_left", "no budget anywhere; the request arrives after its client gave up", func() []schema.Span {
			return build(603,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 600},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 0, end: 500, attrs: attrs(timedOut(), peerSvc("order"))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 700, end: 900})
		}},
		{"retry_amplification_positive", "2 × 2 × 3 attempts: 12 leaf calls at 3 levels", func() []schema.Span {
			return retryChain(701, []int{2, 2, 3}, false)
		}},
		{"retry_amplification_negative", "a handler querying a table four times in a loop", func() []schema.Span {
			return build(702,
				sp{id: 1, svc: "order", name: "GET /order", kind: server, start: 0, end: 100},
				sp{id: 2, parent: 1, svc: "order", name: "SELECT item", kind: client, start: 1, end: 10, attrs: attrs(peerSvc("db"))},
				sp{id: 3, parent: 1, svc: "order", name: "SELECT item", kind: client, start: 11, end: 20, attrs: attrs(peerSvc("db"))},
				sp{id: 4, parent: 1, svc: "order", name: "SELECT item", kind: client, start: 21, end: 30, attrs: attrs(peerSvc("db"))},
				sp{id: 5, parent: 1, svc: "order", name: "SELECT item", kind: client, start: 31, end: 40, attrs: attrs(peerSvc("db"))})
		}},
		{"retry_amplification_resend_count", "attempts known only from http.request.resend_count", func() []schema.Span {
			return build(703,
				sp{id: 1, svc: "order", name: "GET /order", kind: server, start: 0, end: 100},
				sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 1, end: 10, attrs: attrs(peerSvc("stock"))},
				sp{id: 3, parent: 1, svc: "order", name: "GET", kind: client, start: 11, end: 20, attrs: attrs(peerSvc("stock"), resend(1))},
				sp{id: 4, parent: 1, svc: "order", name: "GET", kind: client, start: 21, end: 30, attrs: attrs(peerSvc("stock"), resend(2))})
		}},
		{"retry_without_budget_positive", "a retry started 100 ms after the deadline", func() []schema.Span {
			return build(801,
				sp{id: 1, svc: "order", name: "POST /order", kind: server, start: 0, end: 1300, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 10, end: 710, attrs: attrs(peerSvc("stock"), tmo(700), timedOut())},
				sp{id: 3, parent: 1, svc: "order", name: "GET", kind: client, start: 1100, end: 1200, attrs: attrs(peerSvc("stock"), tmo(700))})
		}},
		{"retry_without_budget_negative", "a retry with 590 ms left and no latency history", func() []schema.Span {
			return build(802,
				sp{id: 1, svc: "order", name: "POST /order", kind: server, start: 0, end: 520, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 10, end: 310, attrs: attrs(peerSvc("stock"), tmo(300), timedOut())},
				sp{id: 3, parent: 1, svc: "order", name: "GET", kind: client, start: 410, end: 510, attrs: attrs(peerSvc("stock"), tmo(300))})
		}},
		{"retry_without_budget_below_p50", "20 calls of 500 ms, then a retry with 250 ms left", func() []schema.Span {
			var out []schema.Span
			for n := 0; n < 20; n++ {
				out = append(out, build(810+n,
					sp{id: 1, svc: "order", name: "POST /order", kind: server, start: 0, end: 520},
					sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 10, end: 510, attrs: attrs(peerSvc("stock"), tmo(700))})...)
			}
			return append(out, build(803,
				sp{id: 1, svc: "order", name: "POST /order", kind: server, start: 0, end: 860, attrs: attrs(rem(1000))},
				sp{id: 2, parent: 1, svc: "order", name: "GET", kind: client, start: 10, end: 710, attrs: attrs(peerSvc("stock"), tmo(700), timedOut())},
				sp{id: 3, parent: 1, svc: "order", name: "GET", kind: client, start: 750, end: 850, attrs: attrs(peerSvc("stock"), tmo(240))})...)
		}},
		{"no_budget_attributes", "a chain that records timeouts but no budget: timing-based findings, and the db call's 30 s timeout inverted under the gateway's 1 s (an inferred deadline)", func() []schema.Span {
			return build(901,
				sp{id: 1, svc: "gateway", name: "GET /checkout", kind: server, start: 0, end: 1200},
				sp{id: 2, parent: 1, svc: "gateway", name: "POST /order", kind: client, start: 100, end: 1100, attrs: attrs(tmo(1000), timedOut(), peerSvc("order"))},
				sp{id: 3, parent: 2, svc: "order", name: "POST /order", kind: server, start: 110, end: 5000},
				sp{id: 4, parent: 3, svc: "order", name: "SELECT", kind: client, start: 120, end: 4990, attrs: attrs(tmo(30000), peerSvc("db"))})
		}},
		{"seed000_independent_timeouts", "seed 000: 30/30/20/15 s timeouts, retries 2 × 2 × 3, db degraded", func() []schema.Span {
			return checkoutIndependentTimeouts(1001)
		}},
		{"seed000_deadline", "seed 000 fixed: one 10 s deadline propagated and respected", func() []schema.Span {
			return checkoutWithDeadline(1002)
		}},
		{"seed002_funded", "seed 002: 2000 → 1900 → 1800 → 1700 ms, 2 × 780 + 100 ms at the database", func() []schema.Span {
			return fourHopChain(1003)
		}},
		{"seed002_unfunded_retry", "seed 002 with a retry added to order → inventory without re-budgeting", func() []schema.Span {
			return fourHopChainUnfundedRetry(1004)
		}},
		{"seed004_gateway_retry", "seed 004: a 10 s gateway retrying a service that waits 30 s on a 13 s partner, 20 requests", func() []schema.Span {
			var out []schema.Span
			for n := 0; n < 20; n++ {
				out = append(out, gatewayRetriesSlowService(1010+n, false, 12000+float64(n)*100)...)
			}
			return out
		}},
		{"seed004_envoy", "seed 004 behind Envoy: the budget known from x-envoy-expected-rq-timeout-ms", func() []schema.Span {
			return gatewayRetriesSlowService(1005, true, 13000)
		}},
	}
}

// otlpJSON encodes spans as one OTLP/JSON ExportTraceServiceRequest: one
// resourceSpans per service, ids in hex, times as decimal strings, in the
// order the spans were given.
func otlpJSON(spans []schema.Span) ([]byte, error) {
	type anyValue map[string]any
	type keyValue struct {
		Key   string   `json:"key"`
		Value anyValue `json:"value"`
	}
	value := func(a schema.Attr) (anyValue, error) {
		switch a.Type {
		case schema.AttrString:
			return anyValue{"stringValue": a.Value}, nil
		case schema.AttrInt:
			return anyValue{"intValue": a.Value}, nil
		case schema.AttrDouble:
			f, err := strconv.ParseFloat(a.Value, 64)
			return anyValue{"doubleValue": f}, err
		case schema.AttrBool:
			return anyValue{"boolValue": a.Value == "true"}, nil
		case schema.AttrSlice:
			var vs []string
			if err := json.Unmarshal([]byte(a.Value), &vs); err != nil {
				return nil, fmt.Errorf("encode %s: %w", a.Key, err)
			}
			values := make([]anyValue, len(vs))
			for i, v := range vs {
				values[i] = anyValue{"stringValue": v}
			}
			return anyValue{"arrayValue": map[string]any{"values": values}}, nil
		}
		return nil, fmt.Errorf("encode %s: attribute type %d not used in fixtures", a.Key, a.Type)
	}
	kvs := func(as schema.Attributes) ([]keyValue, error) {
		out := []keyValue{}
		for _, a := range as {
			v, err := value(a)
			if err != nil {
				return nil, err
			}
			out = append(out, keyValue{a.Key, v})
		}
		return out, nil
	}
	byService := map[string][]any{}
	for i := range spans {
		s := &spans[i]
		attrs, err := kvs(s.Attrs)
		if err != nil {
			return nil, err
		}
		span := map[string]any{
			"traceId":           s.TraceID.String(),
			"spanId":            s.SpanID.String(),
			"name":              s.Name,
			"kind":              int(s.Kind),
			"startTimeUnixNano": strconv.FormatUint(s.StartNs, 10),
			"endTimeUnixNano":   strconv.FormatUint(s.EndNs, 10),
			"attributes":        attrs,
		}
		if !s.ParentSpanID.IsZero() {
			span["parentSpanId"] = s.ParentSpanID.String()
		}
		if s.StatusCode != schema.StatusUnset {
			span["status"] = map[string]any{"code": int(s.StatusCode)}
		}
		if len(s.Events) > 0 {
			var events []any
			for _, e := range s.Events {
				eattrs, err := kvs(e.Attrs)
				if err != nil {
					return nil, err
				}
				events = append(events, map[string]any{"timeUnixNano": strconv.FormatUint(e.TimeNs, 10), "name": e.Name, "attributes": eattrs})
			}
			span["events"] = events
		}
		byService[s.Service] = append(byService[s.Service], span)
	}
	services := make([]string, 0, len(byService))
	for s := range byService {
		services = append(services, s)
	}
	sort.Strings(services)
	var resourceSpans []any
	for _, svc := range services {
		resourceSpans = append(resourceSpans, map[string]any{
			"resource": map[string]any{"attributes": []keyValue{{"service.name", anyValue{"stringValue": svc}}}},
			"scopeSpans": []any{map[string]any{
				"scope": map[string]any{"name": "budgetd/fixtures"},
				"spans": byService[svc],
			}},
		})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"resourceSpans": resourceSpans}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
