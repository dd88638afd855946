package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/store/chsql"
)

// injectionCorpus is what a hostile client puts into filters: SQL quotes,
// comments, UNION, stacked statements, ClickHouse's parameter syntax,
// backslashes, NUL, unicode and very long values.
var injectionCorpus = []string{
	`'`, `''`, `"`, `\`, `\\'`, `\'`, `' OR '1'='1`, `' OR 1=1 --`, `" OR ""="`,
	`'; DROP TABLE spans; --`, `x'); DROP DATABASE budgetd; --`,
	`' UNION SELECT name, name FROM system.tables --`, `') UNION ALL SELECT * FROM system.users --`,
	`/* comment */`, `-- comment`, `#`, `{service:String}`, `{x:Identifier}`, `$1`, `?`, `%s`, `\N`,
	"\x00", "a\x00' OR 1=1", "ünïcødé ☃ 𝔘", "\u202e'\u2028--", "\xff\xfe",
	strings.Repeat("a", 100_000), strings.Repeat(`'\`, 20_000),
}

// injectionParams are the filters of every API route: query parameters,
// and the trace route's path parameter.
var injectionParams = []struct {
	path, param string
}{
	{"/api/v1/findings", "kind"}, {"/api/v1/findings", "severity"}, {"/api/v1/findings", "service"},
	{"/api/v1/findings", "path"}, {"/api/v1/findings", "trace_id"}, {"/api/v1/findings", "next"},
	{"/api/v1/findings", "since"}, {"/api/v1/findings", "until"}, {"/api/v1/findings", "limit"},
	{"/api/v1/paths", "since"}, {"/api/v1/paths", "until"}, {"/api/v1/paths", "limit"}, {"/api/v1/paths", "timeout"},
	{"/api/v1/edges", "since"}, {"/api/v1/edges", "limit"},
	{"/api/v1/summary", "since"}, {"/api/v1/summary", "until"},
	{"/api/v1/traces/", ""}, // the value is the path parameter
}

// TestInjectionCorpus sends every corpus value through every filter of
// the API on every engine: each request is refused with 400 or answers an
// empty result, and the stored data is the same afterwards.
func TestInjectionCorpus(t *testing.T) {
	for _, eng := range engines() {
		t.Run(eng.name, func(t *testing.T) {
			st := eng.open(t)
			loadFixtures(t, st)
			before := tableCounts(t, st)
			ts := newTestServer(t, st)
			statuses := map[int]int{}
			for _, p := range injectionParams {
				for _, v := range injectionCorpus {
					target := p.path + url.PathEscape(v)
					if p.param != "" {
						target = p.path + "?" + url.Values{p.param: {v}, "since": {"8760h"}}.Encode()
						if p.param == "since" {
							target = p.path + "?" + url.Values{p.param: {v}}.Encode()
						}
					}
					resp, err := http.Get(ts.URL + target)
					require.NoError(t, err)
					var body map[string]json.RawMessage
					decErr := json.NewDecoder(resp.Body).Decode(&body)
					resp.Body.Close()
					statuses[resp.StatusCode]++
					short := v
					if len(short) > 40 {
						short = short[:40] + "…"
					}
					switch resp.StatusCode {
					case http.StatusBadRequest, http.StatusNotFound:
					case http.StatusOK:
						require.NoError(t, decErr)
						for _, key := range []string{"findings", "paths", "edges", "spans"} {
							if raw, ok := body[key]; ok {
								require.JSONEq(t, "[]", string(raw), "%s=%q found rows", p.path+p.param, short)
							}
						}
					default:
						t.Fatalf("%s %s=%q: status %d", p.path, p.param, short, resp.StatusCode)
					}
				}
			}
			require.Equal(t, before, tableCounts(t, st), "the data changed")
			t.Logf("%d requests: statuses %v", len(injectionParams)*len(injectionCorpus), statuses)
		})
	}
}

// tableCounts returns the rows of every budgetd table.
func tableCounts(t *testing.T, st *chsql.Store) map[string]uint64 {
	t.Helper()
	ctx := context.Background()
	out := map[string]uint64{}
	for _, table := range []string{"spans", "trace_index", "hops", "findings"} {
		r, err := st.Conn().Query(ctx, "SELECT toUInt64(count()) FROM "+st.Database()+"."+table, nil)
		require.NoError(t, err)
		require.True(t, r.Next(), "count %s: %v", table, r.Err())
		var n uint64
		require.NoError(t, r.Scan(&n))
		r.Close()
		out[table] = n
	}
	return out
}
