package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/budgetd/budgetd/proctest"
)

// redoclyPath is where `make test-setup` (scripts/install-redocly.sh) puts
// Redocly CLI.
const redoclyPath = ".cache/redocly/node_modules/.bin/redocly"

// lintReport is what `redocly lint --format=json` prints.
type lintReport struct {
	Totals struct {
		Errors   int `json:"errors"`
		Warnings int `json:"warnings"`
		Ignored  int `json:"ignored"`
	} `json:"totals"`
	Version  string `json:"version"`
	Problems []struct {
		RuleID   string `json:"ruleId"`
		Severity string `json:"severity"`
		Message  string `json:"message"`
		Location []struct {
			Pointer string `json:"pointer"`
			Start   struct {
				Line int `json:"line"`
				Col  int `json:"col"`
			} `json:"start"`
		} `json:"location"`
	} `json:"problems"`
}

// TestOpenAPILint lints api/openapi.yaml with Redocly CLI and its
// recommended rules (redocly.yaml at the repository root): any error or
// warning fails, and so does a problem hidden in an ignore file.
func TestOpenAPILint(t *testing.T) {
	root := proctest.RepoRoot(t)
	bin := proctest.Tool(t, redoclyPath)
	config := filepath.Join(root, "redocly.yaml")

	// The rules are the recommended ones: redocly.yaml may turn single
	// rules off (each with its reason) but not swap the ruleset.
	raw, err := os.ReadFile(config)
	require.NoError(t, err)
	var cfg struct {
		Extends []string `yaml:"extends"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &cfg))
	require.Equal(t, []string{"recommended"}, cfg.Extends, "redocly.yaml extends")

	cmd := exec.Command(bin, "lint", "--config", config, "--format", "json", filepath.Join(root, "api", "openapi.yaml"))
	cmd.Dir = root
	// Redocly CLI reports usage and looks for updates over the network
	// unless told not to; tests reach no network.
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run() // non-zero on errors; the report says which
	var rep lintReport
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), "redocly lint printed no report (exit: %v)\nstdout: %s\nstderr: %s", runErr, stdout.String(), stderr.String())

	var problems []string
	for _, p := range rep.Problems {
		where := ""
		if len(p.Location) > 0 {
			l := p.Location[0]
			where = l.Pointer + " "
			if l.Start.Line > 0 { // 1.x reports the pointer only
				where = fmt.Sprintf("api/openapi.yaml:%d:%d %s", l.Start.Line, l.Start.Col, where)
			}
		}
		problems = append(problems, fmt.Sprintf("%s%s %s: %s", where, p.Severity, p.RuleID, p.Message))
	}
	require.Zero(t, rep.Totals.Errors+rep.Totals.Warnings+rep.Totals.Ignored,
		"redocly lint %s: %d errors, %d warnings, %d ignored:\n%s", rep.Version,
		rep.Totals.Errors, rep.Totals.Warnings, rep.Totals.Ignored, strings.Join(problems, "\n"))
	require.NoError(t, runErr, "redocly lint reported nothing but failed: %s", stderr.String())
}
