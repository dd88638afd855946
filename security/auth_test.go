package security

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/security/securitytest"
)

func TestTokens(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(file, []byte("# comment\n  token-from-file-0001  \n\ntoken-from-file-0002\n"), 0o600))
	short := filepath.Join(dir, "short")
	require.NoError(t, os.WriteFile(short, []byte("short\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("# nothing\n"), 0o600))
	t.Setenv("SECURITY_TEST_TOKENS", "token-from-env-0001, token-from-env-0002")
	t.Setenv("SECURITY_TEST_EMPTY", "")

	tests := []struct {
		name    string
		cfg     AuthConfig
		wantErr string
		accept  []string
		refuse  []string
	}{
		{name: "off", cfg: AuthConfig{}, accept: []string{"", "Bearer anything"}},
		{
			name: "file and env", cfg: AuthConfig{TokensFile: file, TokensEnv: "SECURITY_TEST_TOKENS"},
			accept: []string{"Bearer token-from-file-0001", "bearer token-from-file-0002", "BEARER token-from-env-0001", "Bearer token-from-env-0002"},
			refuse: []string{"", "token-from-file-0001", "Basic token-from-file-0001", "Bearer token-from-file-000", "Bearer token-from-file-00011", "Bearer ", "Bearer # comment"},
		},
		{name: "missing file", cfg: AuthConfig{TokensFile: filepath.Join(dir, "nope")}, wantErr: "ingest.auth.tokens_file: read tokens"},
		{name: "unset env", cfg: AuthConfig{TokensEnv: "SECURITY_TEST_UNSET"}, wantErr: "ingest.auth.tokens_env: environment variable SECURITY_TEST_UNSET is not set"},
		{name: "empty env", cfg: AuthConfig{TokensEnv: "SECURITY_TEST_EMPTY"}, wantErr: "ingest.auth: no tokens in tokens_env SECURITY_TEST_EMPTY"},
		{name: "empty file", cfg: AuthConfig{TokensFile: empty}, wantErr: "ingest.auth: no tokens"},
		{name: "short token", cfg: AuthConfig{TokensFile: short}, wantErr: "shorter than 16 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tokens, err := tt.cfg.Load("ingest.auth")
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.NotContains(t, err.Error(), "short\n", "errors never carry a token")
				return
			}
			require.NoError(t, err)
			for _, h := range tt.accept {
				require.True(t, tokens.Check(h), "%q refused", h)
			}
			for _, h := range tt.refuse {
				require.False(t, tokens.Check(h), "%q accepted", h)
			}
		})
	}
}

func TestMiddleware(t *testing.T) {
	t.Setenv("SECURITY_TEST_TOKENS", "middleware-token-0001")
	tokens, err := AuthConfig{TokensEnv: "SECURITY_TEST_TOKENS"}.Load("api.auth")
	require.NoError(t, err)
	h := tokens.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }), "/healthz")
	tests := []struct {
		name, path, auth string
		status           int
	}{
		{"open path", "/healthz", "", http.StatusNoContent},
		{"token", "/x", "Bearer middleware-token-0001", http.StatusNoContent},
		{"no token", "/x", "", http.StatusUnauthorized},
		{"wrong token", "/x", "Bearer middleware-token-0002", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tt.path, nil)
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			require.Equal(t, tt.status, w.Code)
			if tt.status == http.StatusUnauthorized {
				require.Equal(t, `Bearer realm="budgetd"`, w.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

func TestTLSConfig(t *testing.T) {
	pki := securitytest.New(t)
	tests := []struct {
		name    string
		cfg     TLSConfig
		wantErr string
		mtls    bool
	}{
		{name: "off", cfg: TLSConfig{}},
		{name: "server", cfg: TLSConfig{CertFile: pki.ServerCert, KeyFile: pki.ServerKey}},
		{name: "mutual", cfg: TLSConfig{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, ClientCAFile: pki.CAFile}, mtls: true},
		{name: "cert without key", cfg: TLSConfig{CertFile: pki.ServerCert}, wantErr: "api.tls.cert_file and api.tls.key_file must be set together"},
		{name: "client ca without cert", cfg: TLSConfig{ClientCAFile: pki.CAFile}, wantErr: "api.tls.client_ca_file needs api.tls.cert_file"},
		{name: "key of another cert", cfg: TLSConfig{CertFile: pki.ServerCert, KeyFile: pki.ClientKey}, wantErr: "api.tls: load certificate"},
		{name: "client ca not pem", cfg: TLSConfig{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, ClientCAFile: pki.ServerKey}, wantErr: "api.tls.client_ca_file: no PEM certificates"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.cfg.ServerConfig("api.tls")
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			if !tt.cfg.Enabled() {
				require.Nil(t, c)
				return
			}
			require.EqualValues(t, 0x0303, c.MinVersion, "TLS 1.2 at least")
			require.Equal(t, tt.mtls, c.ClientCAs != nil)
		})
	}
}
