package security

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSConfig is a listener's `tls` section. With no certificate the
// listener speaks plaintext.
type TLSConfig struct {
	// CertFile and KeyFile are the server's PEM certificate (chain) and
	// private key. Both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile, when set, requires every client to present a
	// certificate signed by one of these PEM CAs (mutual TLS).
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether the listener serves TLS.
func (c TLSConfig) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" }

// Validate checks that the files go together and load. key is the
// section's name in the configuration, such as "api.tls".
func (c TLSConfig) Validate(key string) error {
	_, err := c.ServerConfig(key)
	return err
}

// ServerConfig loads the certificate and returns the server's TLS
// settings: TLS 1.2 at least, client certificates verified against
// client_ca_file when set. It returns nil when TLS is off.
func (c TLSConfig) ServerConfig(key string) (*tls.Config, error) {
	if !c.Enabled() {
		if c.ClientCAFile != "" {
			return nil, fmt.Errorf("%s.client_ca_file needs %s.cert_file and %s.key_file", key, key, key)
		}
		return nil, nil
	}
	if c.CertFile == "" || c.KeyFile == "" {
		return nil, fmt.Errorf("%s.cert_file and %s.key_file must be set together", key, key)
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%s: load certificate: %w", key, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if c.ClientCAFile != "" {
		pem, err := os.ReadFile(c.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.client_ca_file: %w", key, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.client_ca_file: %w", key, errNoCerts)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

var errNoCerts = errors.New("no PEM certificates found")
