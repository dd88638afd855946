package app

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/config"
)

func TestExposureWarnings(t *testing.T) {
	cfg := config.DefaultConfig()
	require.Empty(t, exposureWarnings(cfg), "the defaults listen on localhost only")

	cfg.Ingest.Server.GRPC.Endpoint = "0.0.0.0:4317"
	cfg.Ingest.Server.Auth.TokensFile = "/etc/budgetd/ingest-tokens"
	cfg.API.Endpoint = ":8080"
	require.Equal(t, []string{
		"ingest.grpc 0.0.0.0:4317 accepts connections from other hosts without TLS (ingest.grpc.tls)",
		"api :8080 accepts connections from other hosts without bearer tokens (api.auth) or TLS (api.tls)",
	}, exposureWarnings(cfg))
}
