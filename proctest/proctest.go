// Package proctest helps tests that run real processes: it finds the tools
// `make test-setup` installs under the repository's .cache, and collects a
// process's output for failure messages.
package proctest

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// RepoRoot returns the directory holding go.mod, above the test's working
// directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatalf("no go.mod above %s", wd)
		}
	}
}

// Tool returns the path of a tool installed by `make test-setup` (rel is
// relative to the repository root). A missing tool fails the test: it is a
// setup bug, not a reason to skip.
func Tool(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(RepoRoot(t), rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s not found: run `make test-setup` (%v)", rel, err)
	}
	return p
}

// Output is a bytes.Buffer safe for a process's output copier and the test
// reading it at once.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// String returns everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// Tail returns the last 8000 bytes written, for failure messages.
func (o *Output) Tail() string {
	s := o.String()
	if len(s) > 8000 {
		s = "…" + s[len(s)-8000:]
	}
	return s
}
