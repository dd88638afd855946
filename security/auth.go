package security

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// AuthConfig is an `auth` section: where a listener's bearer tokens come
// from. It holds no token itself, so a configuration can be printed or
// logged without leaking one. Both sources may be set; their tokens add up.
// With neither, authentication is off.
type AuthConfig struct {
	// TokensFile is a file with one token per line; blank lines and lines
	// starting with # are ignored. Keep it readable by budgetd only.
	TokensFile string `yaml:"tokens_file"`
	// TokensEnv names an environment variable holding tokens separated by
	// commas or white space.
	TokensEnv string `yaml:"tokens_env"`
}

// Enabled reports whether requests must carry a token.
func (c AuthConfig) Enabled() bool { return c.TokensFile != "" || c.TokensEnv != "" }

// Validate checks that the sources exist and hold at least one token. key
// is the section's name in the configuration, such as "ingest.auth".
func (c AuthConfig) Validate(key string) error {
	_, err := c.Load(key)
	return err
}

// minTokenLen is the shortest token accepted: shorter ones can be guessed.
const minTokenLen = 16

// Load reads the tokens. It returns nil Tokens when authentication is off.
// Errors name the key and the source, never a token.
func (c AuthConfig) Load(key string) (*Tokens, error) {
	if !c.Enabled() {
		return nil, nil
	}
	var raw []string
	if c.TokensFile != "" {
		data, err := os.ReadFile(c.TokensFile)
		if err != nil {
			return nil, fmt.Errorf("%s.tokens_file: read tokens: %w", key, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line != "" && !strings.HasPrefix(line, "#") {
				raw = append(raw, line)
			}
		}
	}
	if c.TokensEnv != "" {
		v, ok := os.LookupEnv(c.TokensEnv)
		if !ok {
			return nil, fmt.Errorf("%s.tokens_env: environment variable %s is not set", key, c.TokensEnv)
		}
		raw = append(raw, strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })...)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%s: no tokens in %s", key, c.sources())
	}
	t := &Tokens{}
	for i, tok := range raw {
		if len(tok) < minTokenLen {
			return nil, fmt.Errorf("%s: token %d of %s is shorter than %d characters", key, i+1, c.sources(), minTokenLen)
		}
		t.sums = append(t.sums, sha256.Sum256([]byte(tok)))
	}
	return t, nil
}

func (c AuthConfig) sources() string {
	var s []string
	if c.TokensFile != "" {
		s = append(s, "tokens_file "+c.TokensFile)
	}
	if c.TokensEnv != "" {
		s = append(s, "tokens_env "+c.TokensEnv)
	}
	return strings.Join(s, " and ")
}

// Tokens is a set of accepted bearer tokens. It keeps their SHA-256 sums
// only, so every comparison has the same length and takes the same time
// whichever token, if any, matches. A nil *Tokens accepts every request.
type Tokens struct {
	sums [][sha256.Size]byte
}

// ErrUnauthenticated is what a request without an accepted token gets.
var ErrUnauthenticated = errors.New("missing or invalid bearer token")

// Check reports whether an Authorization header value ("Bearer <token>")
// carries an accepted token. Every configured token is compared, in
// constant time, whether or not one already matched.
func (t *Tokens) Check(authorization string) bool {
	if t == nil {
		return true
	}
	const prefix = "bearer "
	if len(authorization) < len(prefix) || !strings.EqualFold(authorization[:len(prefix)], prefix) {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(authorization[len(prefix):])))
	ok := 0
	for i := range t.sums {
		ok |= subtle.ConstantTimeCompare(sum[:], t.sums[i][:])
	}
	return ok == 1
}

// Middleware returns next behind the token check: a request without an
// accepted token gets 401 with a WWW-Authenticate challenge. Paths in open
// (exact matches) pass without a token.
func (t *Tokens) Middleware(next http.Handler, open ...string) http.Handler {
	if t == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range open {
			if r.URL.Path == p {
				next.ServeHTTP(w, r)
				return
			}
		}
		if !t.Check(r.Header.Get("Authorization")) {
			Challenge(w)
			http.Error(w, ErrUnauthenticated.Error(), http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Challenge sets the WWW-Authenticate header a 401 answer carries.
func Challenge(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="budgetd"`)
}
