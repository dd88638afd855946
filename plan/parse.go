package plan

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// MaxFileBytes bounds a chain file; a real chain is a few kilobytes.
const MaxFileBytes = 1 << 20

// Load reads and validates a chain file (the format is documented in
// docs/examples/README.md). Every error is about the input: a missing or
// oversized file, bad YAML, an unknown key or an invalid value, named with
// its line and key.
func Load(path string) (Chain, error) {
	data, err := readFile(path)
	if err != nil {
		return Chain{}, fmt.Errorf("read chain: %w", err)
	}
	c, err := parse(data)
	if err != nil {
		return Chain{}, fmt.Errorf("read chain %s: %w", path, err)
	}
	return c, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s is larger than the %d bytes a chain file may have", path, MaxFileBytes)
	}
	return data, nil
}

// Parse reads and validates a chain from YAML.
func Parse(data []byte) (Chain, error) {
	c, err := parse(data)
	if err != nil {
		return Chain{}, fmt.Errorf("parse chain: %w", err)
	}
	return c, nil
}

// parse walks the YAML node tree itself rather than unmarshalling into
// tagged structs, so that every error names the key as the user wrote it,
// the hop it belongs to and its line.
func parse(data []byte) (Chain, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Chain{}, err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return Chain{}, errors.New("the file is empty: want budget and hops")
	}
	root := doc.Content[0]
	var c Chain
	var hopsNode *yaml.Node
	err := eachKey(root, "the chain", func(key string, v *yaml.Node) error {
		var err error
		switch key {
		case "budget":
			c.Budget, err = positiveDuration(v, "budget")
		case "hops":
			hopsNode = v
		default:
			return unknownKey(v, "", key, "budget, hops")
		}
		return err
	})
	if err != nil {
		return Chain{}, err
	}
	if c.Budget == 0 {
		return Chain{}, errors.New("budget is missing: give the client's end-to-end budget, e.g. budget: 2s")
	}
	if hopsNode == nil {
		return Chain{}, errors.New("hops is missing: list the hops in call order")
	}
	if hopsNode.Kind != yaml.SequenceNode {
		return Chain{}, fmt.Errorf("line %d: hops must be a list of hops", hopsNode.Line)
	}
	for i, hn := range hopsNode.Content {
		h, err := parseHop(hn, i)
		if err != nil {
			return Chain{}, err
		}
		c.Hops = append(c.Hops, h)
	}
	if err := c.Validate(); err != nil {
		return Chain{}, err
	}
	return c, nil
}

func parseHop(n *yaml.Node, i int) (Hop, error) {
	var h Hop
	// The name comes first so that errors about other keys can name the hop
	// wherever the name appears in the mapping.
	if n.Kind == yaml.MappingNode {
		for k := 0; k+1 < len(n.Content); k += 2 {
			if n.Content[k].Value == "name" && n.Content[k+1].Kind == yaml.ScalarNode {
				h.Name = n.Content[k+1].Value
			}
		}
	}
	at := fmt.Sprintf("hops[%d]", i)
	if h.Name != "" {
		at = fmt.Sprintf("hops[%d] (%s)", i, h.Name)
	}
	err := eachKey(n, at, func(key string, v *yaml.Node) error {
		var err error
		switch key {
		case "name":
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" || v.Value == "" {
				return fmt.Errorf("line %d: %s.name must be a non-empty string", v.Line, at)
			}
		case "own_work":
			h.OwnWork, err = duration(v, at+".own_work")
		case "transit":
			h.Transit, err = duration(v, at+".transit")
		case "slack":
			h.Slack, err = duration(v, at+".slack")
		case "timeout":
			h.Timeout, err = positiveDuration(v, at+".timeout")
		case "p50":
			h.P50, err = positiveDuration(v, at+".p50")
		case "retry":
			err = eachKey(v, at+".retry", func(key string, rv *yaml.Node) error {
				var err error
				switch key {
				case "attempts":
					h.Attempts, err = wholeNumber(rv, at+".retry.attempts")
					if err == nil && (h.Attempts < 1 || h.Attempts > MaxAttempts) {
						err = fmt.Errorf("line %d: %s.retry.attempts must be 1..%d (the first call counts), not %d", rv.Line, at, MaxAttempts, h.Attempts)
					}
				case "backoff":
					h.Backoff, err = duration(rv, at+".retry.backoff")
				default:
					return unknownKey(rv, at+".retry", key, "attempts, backoff")
				}
				return err
			})
		default:
			return unknownKey(v, at, key, "name, own_work, transit, slack, timeout, retry, p50")
		}
		return err
	})
	if err != nil {
		return Hop{}, err
	}
	if h.Name == "" {
		return Hop{}, fmt.Errorf("line %d: %s has no name", n.Line, at)
	}
	return h, nil
}

// eachKey calls fn for every key of a mapping node, refusing other nodes and
// repeated keys.
func eachKey(n *yaml.Node, what string, fn func(key string, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s must be a mapping of keys to values", n.Line, what)
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for k := 0; k+1 < len(n.Content); k += 2 {
		key := n.Content[k].Value
		if seen[key] {
			return fmt.Errorf("line %d: %s has %q twice", n.Content[k].Line, what, key)
		}
		seen[key] = true
		if err := fn(key, n.Content[k+1]); err != nil {
			return err
		}
	}
	return nil
}

func unknownKey(v *yaml.Node, at, key, known string) error {
	if at == "" {
		return fmt.Errorf("line %d: unknown key %q (known: %s)", v.Line, key, known)
	}
	return fmt.Errorf("line %d: %s: unknown key %q (known: %s)", v.Line, at, key, known)
}

// duration reads a duration: a string with a unit ("1.9s", "800ms") or a
// plain number of milliseconds (800, 0.5). Negative values are refused.
func duration(v *yaml.Node, key string) (time.Duration, error) {
	bad := func(why string) error {
		return fmt.Errorf("line %d: %s: %s", v.Line, key, why)
	}
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return 0, bad(`want a duration such as "800ms" or "1.9s", or a number of milliseconds`)
	}
	var d time.Duration
	switch v.Tag {
	case "!!int", "!!float":
		ms, err := strconv.ParseFloat(v.Value, 64)
		if err != nil || math.IsNaN(ms) || math.IsInf(ms, 0) {
			return 0, bad(fmt.Sprintf("%q is not a number of milliseconds", v.Value))
		}
		if math.Abs(ms) > float64(MaxDuration.Milliseconds()) {
			return 0, bad(fmt.Sprintf("%s ms is more than %s", v.Value, MaxDuration))
		}
		d = time.Duration(math.Round(ms * float64(time.Millisecond)))
	case "!!str":
		var err error
		if d, err = time.ParseDuration(v.Value); err != nil {
			return 0, bad(fmt.Sprintf(`%q is not a duration: want e.g. "800ms" or "1.9s", or a number of milliseconds`, v.Value))
		}
		if d > MaxDuration || d < -MaxDuration {
			return 0, bad(fmt.Sprintf("%s is more than %s", v.Value, MaxDuration))
		}
	default:
		return 0, bad(fmt.Sprintf(`%q is not a duration: want e.g. "800ms" or "1.9s", or a number of milliseconds`, v.Value))
	}
	if d < 0 {
		return 0, bad(fmt.Sprintf("%s is negative", v.Value))
	}
	return d, nil
}

// positiveDuration reads an optional figure that, when given, must be > 0:
// zero is how the Chain says "not known".
func positiveDuration(v *yaml.Node, key string) (time.Duration, error) {
	d, err := duration(v, key)
	if err == nil && d == 0 {
		err = fmt.Errorf("line %d: %s must be > 0 (leave the key out when it is not known)", v.Line, key)
	}
	return d, err
}

func wholeNumber(v *yaml.Node, key string) (int, error) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" {
		return 0, fmt.Errorf("line %d: %s: want a whole number, not %q", v.Line, key, v.Value)
	}
	n, err := strconv.Atoi(v.Value)
	if err != nil {
		return 0, fmt.Errorf("line %d: %s: want a whole number, not %q", v.Line, key, v.Value)
	}
	return n, nil
}
