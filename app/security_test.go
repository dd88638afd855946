package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/budgetd/budgetd/security/securitytest"
)

// Tokens of the security test: two in the ingest file (a rotation in
// progress), one for the API in an environment variable.
const (
	ingestTokenOld = "ingest-token-0123456789-old"
	ingestTokenNew = "ingest-token-0123456789-new"
	apiToken       = "api-token-0123456789abcdef"
	apiTokensEnv   = "BUDGETD_TEST_API_TOKENS"
)

// TestSecurity starts budgetd with TLS on every listener, mutual TLS on
// OTLP/gRPC and bearer tokens on ingest and the API, and talks to it with
// the OpenTelemetry SDK's exporters and net/http, as real clients would.
func TestSecurity(t *testing.T) {
	pki := securitytest.New(t)
	tokensFile := filepath.Join(t.TempDir(), "ingest-tokens")
	require.NoError(t, os.WriteFile(tokensFile, []byte("# rotated on Monday\n"+ingestTokenOld+"\n\n"+ingestTokenNew+"\n"), 0o600))
	t.Setenv(apiTokensEnv, apiToken)

	cfg := testConfig(t)
	cfg.Ingest.Server.Auth.TokensFile = tokensFile
	cfg.Ingest.Server.GRPC.TLS.CertFile, cfg.Ingest.Server.GRPC.TLS.KeyFile = pki.ServerCert, pki.ServerKey
	cfg.Ingest.Server.GRPC.TLS.ClientCAFile = pki.CAFile
	cfg.Ingest.Server.HTTP.TLS.CertFile, cfg.Ingest.Server.HTTP.TLS.KeyFile = pki.ServerCert, pki.ServerKey
	cfg.API.TLS.CertFile, cfg.API.TLS.KeyFile = pki.ServerCert, pki.ServerKey
	cfg.API.Auth.TokensEnv = apiTokensEnv
	a, err := Start(context.Background(), cfg, nil)
	require.NoError(t, err)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, a.Shutdown(ctx))
	}()
	grpcAddr, httpAddr := a.IngestAddrs()

	t.Run("otlp/grpc", func(t *testing.T) {
		tests := []struct {
			name  string
			creds credentials.TransportCredentials // nil: plaintext
			token string
			code  codes.Code
		}{
			{"mtls and the new token", credentials.NewTLS(pki.ClientTLS(pki.ClientPair)), ingestTokenNew, codes.OK},
			{"mtls and the old token", credentials.NewTLS(pki.ClientTLS(pki.ClientPair)), ingestTokenOld, codes.OK},
			{"mtls and a wrong token", credentials.NewTLS(pki.ClientTLS(pki.ClientPair)), ingestTokenNew + "x", codes.Unauthenticated},
			{"mtls and no token", credentials.NewTLS(pki.ClientTLS(pki.ClientPair)), "", codes.Unauthenticated},
			{"tls without a client certificate", credentials.NewTLS(pki.ClientTLS()), ingestTokenNew, codes.Unavailable},
			{"a client certificate from another CA", credentials.NewTLS(pki.ClientTLS(pki.RoguePair)), ingestTokenNew, codes.Unavailable},
			{"plaintext", nil, ingestTokenNew, codes.Unavailable},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				opts := []otlptracegrpc.Option{
					otlptracegrpc.WithEndpoint(grpcAddr.String()),
					otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}),
					otlptracegrpc.WithTimeout(5 * time.Second),
				}
				if tt.creds != nil {
					opts = append(opts, otlptracegrpc.WithTLSCredentials(tt.creds))
				} else {
					opts = append(opts, otlptracegrpc.WithInsecure())
				}
				if tt.token != "" {
					opts = append(opts, otlptracegrpc.WithHeaders(map[string]string{"Authorization": "Bearer " + tt.token}))
				}
				err := export(t, func(ctx context.Context) (sdktrace.SpanExporter, error) { return otlptracegrpc.New(ctx, opts...) })
				require.Equal(t, tt.code, status.Code(err), "export: %v", err)
			})
		}
	})

	t.Run("otlp/http", func(t *testing.T) {
		tests := []struct {
			name    string
			tls     *tls.Config // nil: plaintext
			token   string
			wantErr string
		}{
			{"tls and the new token", pki.ClientTLS(), ingestTokenNew, ""},
			{"tls and the old token", pki.ClientTLS(), ingestTokenOld, ""},
			{"tls and a wrong token", pki.ClientTLS(), "wrong-token-0123456789", "401"},
			{"tls and no token", pki.ClientTLS(), "", "401"},
			{"plaintext", nil, ingestTokenNew, "400"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				opts := []otlptracehttp.Option{
					otlptracehttp.WithEndpoint(httpAddr.String()),
					otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
					otlptracehttp.WithTimeout(5 * time.Second),
				}
				if tt.tls != nil {
					opts = append(opts, otlptracehttp.WithTLSClientConfig(tt.tls))
				} else {
					opts = append(opts, otlptracehttp.WithInsecure())
				}
				if tt.token != "" {
					opts = append(opts, otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + tt.token}))
				}
				err := export(t, func(ctx context.Context) (sdktrace.SpanExporter, error) { return otlptracehttp.New(ctx, opts...) })
				if tt.wantErr == "" {
					require.NoError(t, err)
					return
				}
				require.ErrorContains(t, err, tt.wantErr)
			})
		}
	})

	t.Run("api", func(t *testing.T) {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: pki.ClientTLS()}}
		tests := []struct {
			name, path, token string
			status            int
			code              string
		}{
			{"summary with the token", "/api/v1/summary", apiToken, http.StatusOK, ""},
			{"summary without a token", "/api/v1/summary", "", http.StatusUnauthorized, "unauthenticated"},
			{"summary with the ingest token", "/api/v1/summary", ingestTokenNew, http.StatusUnauthorized, "unauthenticated"},
			{"findings with a wrong token", "/api/v1/findings", apiToken + "x", http.StatusUnauthorized, "unauthenticated"},
			{"trace without a token", "/api/v1/traces/0123456789abcdef0123456789abcdef", "", http.StatusUnauthorized, "unauthenticated"},
			{"metrics without a token", "/metrics", "", http.StatusUnauthorized, "unauthenticated"},
			{"metrics with the token", "/metrics", apiToken, http.StatusOK, ""},
			{"healthz stays open", "/healthz", "", http.StatusOK, ""},
			{"readyz stays open", "/readyz", "", http.StatusOK, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				req, err := http.NewRequest(http.MethodGet, "https://"+a.APIAddr()+tt.path, nil)
				require.NoError(t, err)
				if tt.token != "" {
					req.Header.Set("Authorization", "Bearer "+tt.token)
				}
				resp, err := client.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				require.Equal(t, tt.status, resp.StatusCode)
				if tt.code != "" {
					require.Equal(t, `Bearer realm="budgetd"`, resp.Header.Get("WWW-Authenticate"))
					var body struct {
						Error struct{ Code string } `json:"error"`
					}
					require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
					require.Equal(t, tt.code, body.Error.Code)
				}
			})
		}
		t.Run("plaintext", func(t *testing.T) {
			resp, err := http.Get("http://" + a.APIAddr() + "/healthz")
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusBadRequest, resp.StatusCode, "Go's TLS server answers a plaintext request 400")
		})
		t.Run("tls 1.1", func(t *testing.T) {
			c := pki.ClientTLS()
			c.MinVersion, c.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
			_, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: c}}).Get("https://" + a.APIAddr() + "/healthz")
			require.Error(t, err, "TLS below 1.2 must be refused")
		})
	})
}

// export sends one span through a new exporter and returns the export's
// error.
func export(t *testing.T, newExporter func(context.Context) (sdktrace.SpanExporter, error)) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	exp, err := newExporter(ctx)
	require.NoError(t, err)
	defer func() { _ = exp.Shutdown(ctx) }()
	now := time.Now()
	span := tracetest.SpanStub{
		Name: "GET /secure",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{1, 2, 3, byte(now.UnixNano())}, SpanID: trace.SpanID{1, byte(now.UnixNano())}, TraceFlags: trace.FlagsSampled,
		}),
		StartTime: now, EndTime: now.Add(time.Millisecond),
	}
	return exp.ExportSpans(ctx, tracetest.SpanStubs{span}.Snapshots())
}
