package crashtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/security/securitytest"
	"github.com/budgetd/budgetd/store/clickhouse/clickhousetest"
)

// TestCollectorMutualTLS runs the deployment docs/security.md describes: a
// real Collector exports over mutual TLS with a bearer token to `budgetd
// serve`, and every span the Collector acknowledged is stored exactly once.
// A Collector with a wrong token is refused with UNAUTHENTICATED, which it
// does not retry, and delivers nothing.
func TestCollectorMutualTLS(t *testing.T) {
	bin := buildBudgetd(t)
	pki := securitytest.New(t)
	const token = "collector-token-0123456789"
	tokens := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte(token+"\n"), 0o600))
	srv := clickhousetest.Start(t)
	b := newBudgetd(t, bin, budgetdOptions{
		dsn:    srv.DSN("mtls"),
		ingest: fmt.Sprintf("  auth:\n    tokens_file: %s\n", tokens),
		grpc: fmt.Sprintf("    tls:\n      cert_file: %s\n      key_file: %s\n      client_ca_file: %s\n",
			pki.ServerCert, pki.ServerKey, pki.CAFile),
	})
	b.start(t)

	exporterTLS := func(tok string) string {
		return fmt.Sprintf("    tls:\n      ca_file: %s\n      cert_file: %s\n      key_file: %s\n    headers:\n      authorization: \"Bearer %s\"\n",
			pki.CAFile, pki.ClientCert, pki.ClientKey, tok)
	}
	tests := []struct {
		name   string
		token  string
		stored bool
	}{
		{"wrong token", token + "-revoked", false},
		{"right token", token, true}, // last: it stops budgetd to read the store
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			receiver := freeAddr(t)
			col := startCollectorWith(t, receiver, collectorConfigWith(receiver, b.grpc, exporterTLS(tt.token)))
			s := newSender(t, receiver, crashSpansPerRq)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for range 50 {
				require.NoError(t, s.send(ctx), "the Collector refused a request")
			}
			// The wrong token's requests are refused permanently
			// (UNAUTHENTICATED is not retried), so stopping is quick.
			col.stop(t, time.Minute)
			if !tt.stored {
				require.Contains(t, col.output.String(), "Unauthenticated", "the Collector saw the refusal")
				return
			}
			b.proc.stop(t, time.Minute)
			v := compare(s.acked, storedSpans(t, openStore(t, b)))
			require.Zero(t, v.lost)
			require.Equal(t, v.acked, v.storedRows, "stored exactly once")
			t.Logf("over mutual TLS with a token: %d spans acknowledged, %d stored", v.acked, v.storedRows)
		})
	}
}
