package embedded

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzScanPlainMatchesEncodingJSON: wherever scanPlain stores a value, it
// is the value encoding/json stores for the same column and destination.
func FuzzScanPlainMatchesEncodingJSON(f *testing.F) {
	for _, seed := range []string{`"gateway"`, `"a\"b"`, `"tab\there"`, `"\u00e9"`, `"é"`, "\"\xff\"", `""`, `"`,
		`0`, `-0`, `007`, `-12`, `18446744073709551615`, `18446744073709551616`, `-9223372036854775808`, `255`, `256`,
		`1.5`, `1e3`, `-0.25E-2`, `1.`, `.5`, `1e`, `01.5`, `null`, `true`, `[1,2]`, `[1.5, -2e3]`, `["a", "b\n"]`, `[]`, `[1,]`,
		`nan`, `+1`, ` 1`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		check := func(fast, slow any) {
			if !scanPlain([]byte(raw), fast) {
				return
			}
			require.NoError(t, json.Unmarshal([]byte(raw), slow), "scanPlain took %q, encoding/json refuses it", raw)
			require.Equal(t, slow, fast, "%q", raw)
		}
		var s1, s2 string
		check(&s1, &s2)
		var u1, u2 uint64
		check(&u1, &u2)
		var i1, i2 int64
		check(&i1, &i2)
		var f1, f2 float64
		check(&f1, &f2)
		var b1, b2 uint8
		check(&b1, &b2)
		var ss1, ss2 []string
		check(&ss1, &ss2)
		var fs1, fs2 []float64
		check(&fs1, &fs2)
	})
}

// TestScanPlainTakesTheCommonValues: the values chDB writes most are taken
// without encoding/json, and the rest are left to it.
func TestScanPlainTakesTheCommonValues(t *testing.T) {
	var s string
	require.True(t, scanPlain([]byte(`"checkout:POST /cart > pricing:quote"`), &s))
	require.Equal(t, "checkout:POST /cart > pricing:quote", s)
	require.True(t, scanPlain([]byte(`"café"`), &s))
	require.Equal(t, "café", s)
	require.False(t, scanPlain([]byte(`"line\nbreak"`), &s), "escapes go to encoding/json")
	var u uint64
	require.True(t, scanPlain([]byte(`1764700000000000000`), &u))
	require.EqualValues(t, 1764700000000000000, u)
	var f float64
	require.True(t, scanPlain([]byte(`-0.25e1`), &f))
	require.Equal(t, -2.5, f)
	require.False(t, scanPlain([]byte(`null`), &f), "null goes to encoding/json, which leaves the value")
	var a []string
	require.True(t, scanPlain([]byte(`["budget_ms", "timeout_ms"]`), &a))
	require.Equal(t, []string{"budget_ms", "timeout_ms"}, a)
	var m map[string]float64
	require.False(t, scanPlain([]byte(`{"a":1}`), &m), "maps go to encoding/json")
}

// BenchmarkRowsScan reads 1,000 rows shaped like the findings read's
// (ids, names, a path, a time, evidence arrays, a message).
func BenchmarkRowsScan(b *testing.B) {
	var data []byte
	for range 1000 {
		data = append(data, `["5f1c0e7a9b3d2c41","timeout_inversion","critical","4bf92f3577b34da6a3ce929d0e0e4736","00f067aa0ba902b7","pricing","POST /pricing/v1/items","order","pricing","gateway:POST /checkout > order:POST /order/v1/items > pricing:POST /pricing/v1/items",1764700000123456789,["budget_ms","timeout_ms","remaining_ms"],[250,1000,180.5],"pricing waits 1000 ms for a call its caller gives 250 ms"]`+"\n"...)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r := newRows(data)
		for r.Next() {
			var id, kind, sev, trace, span, svc, op, caller, callee, path, msg string
			var ns uint64
			var keys []string
			var values []float64
			if err := r.Scan(&id, &kind, &sev, &trace, &span, &svc, &op, &caller, &callee, &path, &ns, &keys, &values, &msg); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// FuzzSplitRowMatchesEncodingJSON: for every row encoding/json reads as an
// array, splitRow finds the same elements.
func FuzzSplitRowMatchesEncodingJSON(f *testing.F) {
	for _, seed := range []string{`[]`, `[1]`, ` [ 1 , "a,b" ] `, `["a\"],[", [1,[2,3]], {"k":[1,"]"]}, null]`,
		`["\\", 2]`, `[1,]`, `[,1]`, `[1 2]`, `["unterminated]`, `[[1]`, `[1]]`, `[{]`, `1`, `["é", -1.5e3]`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		var want []json.RawMessage
		if json.Unmarshal([]byte(line), &want) != nil || want == nil {
			return // not a JSON array: encoding/json decides, as Next falls back to it
		}
		got, ok := splitRow([]byte(line), nil)
		require.True(t, ok, "%q", line)
		require.Len(t, got, len(want), "%q", line)
		for i := range want {
			require.Equal(t, string(want[i]), string(got[i]), "%q element %d", line, i)
		}
	})
}
