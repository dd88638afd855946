package security

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExposureWarning(t *testing.T) {
	auth := AuthConfig{TokensFile: "/etc/budgetd/tokens"}
	tls := TLSConfig{CertFile: "c.pem", KeyFile: "k.pem"}
	for _, tt := range []struct {
		endpoint string
		auth     AuthConfig
		tls      TLSConfig
		want     string
	}{
		{"localhost:4317", AuthConfig{}, TLSConfig{}, ""},
		{"127.0.0.1:4317", AuthConfig{}, TLSConfig{}, ""},
		{"[::1]:4317", AuthConfig{}, TLSConfig{}, ""},
		{"", AuthConfig{}, TLSConfig{}, ""},
		{"0.0.0.0:4317", auth, tls, ""},
		{"0.0.0.0:4317", AuthConfig{}, TLSConfig{}, "ingest.grpc 0.0.0.0:4317 accepts connections from other hosts without bearer tokens (ingest.auth) or TLS (ingest.grpc.tls)"},
		{":4317", auth, TLSConfig{}, "ingest.grpc :4317 accepts connections from other hosts without TLS (ingest.grpc.tls)"},
		{"10.0.0.5:4317", AuthConfig{}, tls, "ingest.grpc 10.0.0.5:4317 accepts connections from other hosts without bearer tokens (ingest.auth)"},
		{"budgetd.internal:4317", AuthConfig{}, tls, "ingest.grpc budgetd.internal:4317 accepts connections from other hosts without bearer tokens (ingest.auth)"},
	} {
		l := Listener{Name: "ingest.grpc", Endpoint: tt.endpoint, Auth: tt.auth, AuthKey: "ingest.auth", TLS: tt.tls, TLSKey: "ingest.grpc.tls"}
		require.Equal(t, tt.want, ExposureWarning(l), tt.endpoint)
	}
}
