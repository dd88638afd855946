package sim

import (
	"embed"
	"fmt"
)

//go:embed scenarios/*.yaml
var scenarioFiles embed.FS

// Demo lists the embedded scenarios in the order `budgetd sim --demo` runs
// them: the healthy chain and seed 002 first, then seed 004, then seed 000's
// three policies, worst first.
var Demo = []string{
	"healthy",
	"seed002_chain",
	"seed004_gateway_retry",
	"seed000_independent",
	"seed000_ladder",
	"seed000_deadline",
}

// Embedded returns the embedded scenario named name (a file name under
// sim/scenarios without .yaml), parsed and validated.
func Embedded(name string) (Scenario, error) {
	data, err := scenarioFiles.ReadFile("scenarios/" + name + ".yaml")
	if err != nil {
		return Scenario{}, fmt.Errorf("read embedded scenario %s: %w", name, err)
	}
	s, err := Parse(data)
	if err != nil {
		return Scenario{}, fmt.Errorf("embedded scenario %s: %w", name, err)
	}
	return s, nil
}
