package budget

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// grpcTimeoutCases is testdata/grpc_timeout_cases.json, the grpc-timeout
// cases this library shares with budgetd's reader of the header
// (analyze/budgetread reads the same file), taken from grpc-go's own
// decoder and encoder.
type grpcTimeoutCases struct {
	About []string
	Parse []struct {
		Name  string
		In    string
		NS    *int64 // the duration In means; nil when it is refused
		Error string // budgetd's reason for refusing In; this library has none
	}
	Format []struct {
		Name   string
		NS     int64
		Want   string
		GRPCGo string `json:"grpc_go"` // what grpc-go's EncodeDuration writes
	}
}

func loadGRPCTimeoutCases(t *testing.T) grpcTimeoutCases {
	t.Helper()
	raw, err := os.ReadFile("testdata/grpc_timeout_cases.json")
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c grpcTimeoutCases
	require.NoError(t, dec.Decode(&c))
	require.NotEmpty(t, c.Parse)
	require.NotEmpty(t, c.Format)
	for _, p := range c.Parse {
		require.True(t, (p.NS == nil) != (p.Error == ""), "parse case %q needs either ns or error", p.Name)
	}
	return c
}

// TestGRPCTimeoutCases runs the shared cases: parseGRPCTimeout accepts what
// grpc-go accepts and reads the same duration; formatGRPCTimeout writes the
// expected value, which parses to the duration grpc-go's encoding of the
// same figure parses to, never less than the figure.
func TestGRPCTimeoutCases(t *testing.T) {
	cases := loadGRPCTimeoutCases(t)
	for _, c := range cases.Parse {
		t.Run("parse/"+c.Name, func(t *testing.T) {
			got, ok := parseGRPCTimeout(c.In)
			require.Equal(t, c.NS != nil, ok, "%q", c.In)
			if ok {
				require.Equal(t, time.Duration(*c.NS), got, "%q", c.In)
			}
		})
	}
	for _, c := range cases.Format {
		t.Run("format/"+c.Name, func(t *testing.T) {
			in := time.Duration(c.NS)
			got := formatGRPCTimeout(in)
			require.Equal(t, c.Want, got)
			back, ok := parseGRPCTimeout(got)
			require.True(t, ok, got)
			viaGRPC, ok := parseGRPCTimeout(c.GRPCGo)
			require.True(t, ok, c.GRPCGo)
			require.Equal(t, viaGRPC, back, "%q and grpc-go's %q must mean the same", got, c.GRPCGo)
			require.GreaterOrEqual(t, back, max(in, 0), "the callee must never get less time than sent")
		})
	}
}
