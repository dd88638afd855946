package schema

import (
	"encoding/json"
	"strconv"
)

// AttrType is the OTLP type of an attribute value. Values are kept in a
// canonical string form (see Attr) so they store as parallel Array(String)
// columns on every ClickHouse version and round-trip exactly.
type AttrType uint8

// The attribute value types. The numbering is stored; never renumber.
const (
	AttrEmpty  AttrType = 0 // OTLP empty value
	AttrString AttrType = 1
	AttrBool   AttrType = 2
	AttrInt    AttrType = 3
	AttrDouble AttrType = 4
	AttrBytes  AttrType = 5 // Value is standard base64
	AttrSlice  AttrType = 6 // Value is a JSON array
	AttrMap    AttrType = 7 // Value is a JSON object
)

// Attr is one attribute. Value holds the canonical string form of the value:
// the string itself, "true"/"false", a base-10 integer, a Go 'g' float, base64
// bytes, or JSON for arrays and maps (header attributes such as
// http.request.header.x-request-timeout-ms arrive as JSON string arrays).
type Attr struct {
	Key   string
	Type  AttrType
	Value string
}

// Attributes is an ordered attribute list. Lookups are linear: spans carry
// tens of attributes, where a scan beats building a map.
type Attributes []Attr

// Get returns the attribute with the given key.
func (as Attributes) Get(key string) (Attr, bool) {
	for _, a := range as {
		if a.Key == key {
			return a, true
		}
	}
	return Attr{}, false
}

// Str is a convenience constructor for a string attribute.
func Str(key, value string) Attr { return Attr{Key: key, Type: AttrString, Value: value} }

// Int is a convenience constructor for an integer attribute.
func Int(key string, value int64) Attr {
	return Attr{Key: key, Type: AttrInt, Value: strconv.FormatInt(value, 10)}
}

// Double is a convenience constructor for a floating-point attribute.
func Double(key string, value float64) Attr {
	return Attr{Key: key, Type: AttrDouble, Value: strconv.FormatFloat(value, 'g', -1, 64)}
}

// Bool is a convenience constructor for a boolean attribute.
func Bool(key string, value bool) Attr {
	return Attr{Key: key, Type: AttrBool, Value: strconv.FormatBool(value)}
}

// Strings is a convenience constructor for a string-array attribute, the
// OTel convention for HTTP header and gRPC metadata values.
func Strings(key string, values ...string) Attr {
	if values == nil {
		values = []string{}
	}
	b, _ := json.Marshal(values) // a []string always marshals
	return Attr{Key: key, Type: AttrSlice, Value: string(b)}
}
