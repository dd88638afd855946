package apiclient

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/budgetd/budgetd/proctest"
)

// oapiCodegenPath is where `make test-setup` (scripts/install-oapi-codegen.sh)
// puts the generator, at the version that wrote client.gen.go.
const oapiCodegenPath = ".cache/bin/oapi-codegen"

// TestGeneratedClientUpToDate regenerates the client from api/openapi.yaml,
// as the go:generate line in doc.go does, and compares it with the
// committed client.gen.go.
func TestGeneratedClientUpToDate(t *testing.T) {
	bin := proctest.Tool(t, oapiCodegenPath)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "-config", "oapi-codegen.yaml", "../openapi.yaml")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "oapi-codegen: %s", stderr.String())
	committed, err := os.ReadFile("client.gen.go")
	require.NoError(t, err)
	if bytes.Equal(stdout.Bytes(), committed) {
		return
	}
	got, want := strings.Split(string(committed), "\n"), strings.Split(stdout.String(), "\n")
	line := 0
	for line < min(len(got), len(want)) && got[line] == want[line] {
		line++
	}
	t.Fatalf("api/apiclient/client.gen.go is not what api/openapi.yaml generates: run `go generate ./api/apiclient` (make generate).\n"+
		"First difference, line %d:\ncommitted: %q\ngenerated: %q", line+1, lineAt(got, line), lineAt(want, line))
}

// lineAt returns lines[i], or "" past the end.
func lineAt(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return ""
}
