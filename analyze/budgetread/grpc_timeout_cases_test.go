package budgetread

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// grpcTimeoutCasesFile holds the grpc-timeout cases shared with the budget
// library, which writes the header budgetd reads here. They are taken from
// grpc-go's own decoder and encoder.
const grpcTimeoutCasesFile = "../../budget/testdata/grpc_timeout_cases.json"

type grpcTimeoutCases struct {
	About []string
	Parse []struct {
		Name  string
		In    string
		NS    *int64 // the duration In means; nil when it is refused
		Error string // the reason ParseGRPCTimeout gives for refusing In
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
	raw, err := os.ReadFile(grpcTimeoutCasesFile)
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

// TestGRPCTimeoutCases runs the shared cases: ParseGRPCTimeout accepts what
// grpc-go accepts, reads the same duration and names its reason for a
// refusal; FormatGRPCTimeout writes the expected value, which parses to the
// duration grpc-go's encoding of the same figure parses to, never less than
// the figure.
func TestGRPCTimeoutCases(t *testing.T) {
	cases := loadGRPCTimeoutCases(t)
	for _, c := range cases.Parse {
		t.Run("parse/"+c.Name, func(t *testing.T) {
			got, err := ParseGRPCTimeout(c.In)
			if c.NS == nil {
				require.ErrorContains(t, err, c.Error)
				require.ErrorContains(t, err, "parse grpc-timeout")
				require.Zero(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, time.Duration(*c.NS), got)
		})
	}
	for _, c := range cases.Format {
		t.Run("format/"+c.Name, func(t *testing.T) {
			in := time.Duration(c.NS)
			got := FormatGRPCTimeout(in)
			require.Equal(t, c.Want, got)
			back, err := ParseGRPCTimeout(got)
			require.NoError(t, err)
			viaGRPC, err := ParseGRPCTimeout(c.GRPCGo)
			require.NoError(t, err)
			require.Equal(t, viaGRPC, back, "%q and grpc-go's %q must mean the same", got, c.GRPCGo)
			require.GreaterOrEqual(t, back, max(in, 0), "the receiver must never get less time than sent")
		})
	}
}
