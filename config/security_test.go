package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/security/securitytest"
)

// TestSecurityKeys loads the auth and tls sections from YAML and checks
// that Validate names the key of a setting that cannot work.
func TestSecurityKeys(t *testing.T) {
	pki := securitytest.New(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("config-test-token-0001\n"), 0o600))
	t.Setenv("CONFIG_TEST_TOKENS", "config-test-token-0002")
	tests := []struct {
		name, yaml, wantErr string
	}{
		{name: "everything on", yaml: "ingest:\n  auth: {tokens_file: " + tokens + "}\n" +
			"  grpc: {tls: {cert_file: " + pki.ServerCert + ", key_file: " + pki.ServerKey + ", client_ca_file: " + pki.CAFile + "}}\n" +
			"  http: {tls: {cert_file: " + pki.ServerCert + ", key_file: " + pki.ServerKey + "}}\n" +
			"api:\n  auth: {tokens_env: CONFIG_TEST_TOKENS, public_metrics: true}\n" +
			"  tls: {cert_file: " + pki.ServerCert + ", key_file: " + pki.ServerKey + "}\n"},
		{name: "unset token variable", yaml: "api: {auth: {tokens_env: CONFIG_TEST_UNSET}}\n",
			wantErr: "api.auth.tokens_env: environment variable CONFIG_TEST_UNSET is not set"},
		{name: "missing token file", yaml: "ingest: {auth: {tokens_file: /nonexistent/tokens}}\n",
			wantErr: "ingest.auth.tokens_file: read tokens"},
		{name: "certificate without key", yaml: "ingest: {grpc: {tls: {cert_file: " + pki.ServerCert + "}}}\n",
			wantErr: "ingest.grpc.tls.cert_file and ingest.grpc.tls.key_file must be set together"},
		{name: "client ca without certificate", yaml: "ingest: {http: {tls: {client_ca_file: " + pki.CAFile + "}}}\n",
			wantErr: "ingest.http.tls.client_ca_file needs"},
		{name: "misspelt key", yaml: "api: {auth: {token_file: x}}\n", wantErr: "field token_file not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c.yaml")
			require.NoError(t, os.WriteFile(p, []byte(tt.yaml), 0o600))
			c, err := Load(p)
			if err == nil {
				err = c.Validate()
			}
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.True(t, c.API.Auth.PublicMetrics)
			require.Equal(t, pki.CAFile, c.Ingest.Server.GRPC.TLS.ClientCAFile)
		})
	}
}
