package embedded

import (
	"fmt"
	"math"
	"strconv"
)

// appendJSONRow appends one JSONCompactEachRow row: a JSON array of values.
func appendJSONRow(b []byte, vals []any) ([]byte, error) {
	b = append(b, '[')
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendJSONValue(b, v); err != nil {
			return b, fmt.Errorf("column %d: %w", i, err)
		}
	}
	return append(b, ']'), nil
}

func appendJSONValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return appendJSONString(b, v), nil
	case int8:
		return strconv.AppendInt(b, int64(v), 10), nil
	case uint8:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	case float64:
		return appendFloat(b, v), nil
	case *float64:
		if v == nil {
			return append(b, "null"...), nil
		}
		return appendFloat(b, *v), nil
	case []string:
		return appendArray(b, len(v), func(b []byte, i int) []byte { return appendJSONString(b, v[i]) }), nil
	case []uint8:
		return appendArray(b, len(v), func(b []byte, i int) []byte { return strconv.AppendUint(b, uint64(v[i]), 10) }), nil
	case []uint64:
		return appendArray(b, len(v), func(b []byte, i int) []byte { return strconv.AppendUint(b, v[i], 10) }), nil
	case []float64:
		return appendArray(b, len(v), func(b []byte, i int) []byte { return appendFloat(b, v[i]) }), nil
	case [][]string:
		return appendArray(b, len(v), func(b []byte, i int) []byte {
			b, _ = appendJSONValue(b, v[i])
			return b
		}), nil
	case [][]uint8:
		return appendArray(b, len(v), func(b []byte, i int) []byte {
			b, _ = appendJSONValue(b, v[i])
			return b
		}), nil
	default:
		return b, fmt.Errorf("unsupported value type %T", v)
	}
}

func appendArray(b []byte, n int, elem func([]byte, int) []byte) []byte {
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, i)
	}
	return append(b, ']')
}

// appendFloat writes a float the way ClickHouse's JSON reader accepts;
// non-finite values use its nan/inf spellings.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "nan"...)
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string. Bytes other than the quote,
// backslash and control characters pass through unchanged, so invalid UTF-8
// is stored as the bytes it was rather than replaced.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\t':
			b = append(b, '\\', 't')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
