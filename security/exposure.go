package security

import (
	"fmt"
	"net"
	"strings"
)

// Listener is one listener's address and protection, named by the config
// keys a warning points at.
type Listener struct {
	Name     string // e.g. "ingest.grpc"
	Endpoint string // host:port; an empty host, 0.0.0.0 and :: are every interface
	Auth     AuthConfig
	AuthKey  string // e.g. "ingest.auth"
	TLS      TLSConfig
	TLSKey   string // e.g. "ingest.grpc.tls"
}

// ExposureWarning returns a warning for a listener that accepts
// connections from other hosts without bearer tokens or without TLS, or ""
// when it binds to loopback only or has both.
func ExposureWarning(l Listener) string {
	endpoint, auth, tls := l.Endpoint, l.Auth, l.TLS
	if endpoint == "" || Loopback(endpoint) || auth.Enabled() && tls.Enabled() {
		return ""
	}
	var missing []string
	if !auth.Enabled() {
		missing = append(missing, "bearer tokens ("+l.AuthKey+")")
	}
	if !tls.Enabled() {
		missing = append(missing, "TLS ("+l.TLSKey+")")
	}
	return fmt.Sprintf("%s %s accepts connections from other hosts without %s", l.Name, endpoint, strings.Join(missing, " or "))
}

// Loopback reports whether host:port names only this machine: localhost or
// a loopback address.
func Loopback(endpoint string) bool {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
