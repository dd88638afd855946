package ingest

import (
	"encoding/base64"
	"math"
	"strconv"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// This file writes the canonical forms of bytes, array and map attribute
// values straight into the converter's buffer. encoding/json would need the
// values as Go maps and slices first (pcommon's AsRaw), which allocates per
// element; the output here is byte-for-byte what json.Marshal produces for
// those values (the tests check it), so the canonical form does not depend
// on which path built an attribute.

// appendBytes appends the standard base64 form of bs, cut to whole base64
// quanta so that the result fits MaxAttrValueBytes and still decodes.
func (st *converter) appendBytes(dst []byte, bs pcommon.ByteSlice) []byte {
	n := bs.Len()
	if maxRaw := st.lim.MaxAttrValueBytes / 4 * 3; n > maxRaw {
		n = maxRaw
		st.stats.TruncatedValues++
	}
	return base64.StdEncoding.AppendEncode(dst, st.rawBytes(bs, n))
}

// rawBytes copies the first n bytes of bs into scratch space. ByteSlice only
// offers a copying AsRaw; reusing one scratch slice avoids an allocation
// per value.
func (st *converter) rawBytes(bs pcommon.ByteSlice, n int) []byte {
	st.raw = st.raw[:0]
	for i := 0; i < n; i++ {
		st.raw = append(st.raw, bs.At(i))
	}
	return st.raw
}

// appendTopSlice appends an array attribute value as a JSON array. When the
// array does not fit MaxAttrValueBytes it keeps the leading elements that
// fit: cutting inside an element would leave invalid JSON.
func (st *converter) appendTopSlice(dst []byte, s pcommon.Slice) []byte {
	start := len(dst)
	defer st.bound(start)()
	dst = append(dst, '[')
	for i := 0; i < s.Len(); i++ {
		mark := len(dst)
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = st.appendJSON(dst, s.At(i))
		if st.cutAt(dst, start) {
			dst = dst[:mark]
			st.stats.TruncatedValues++
			break
		}
	}
	return append(dst, ']')
}

// appendTopMap appends a map attribute value as a JSON object, in wire order
// (duplicate keys, which OTLP forbids but the wire allows, are kept). When it
// does not fit MaxAttrValueBytes it keeps the leading entries that fit.
func (st *converter) appendTopMap(dst []byte, m pcommon.Map) []byte {
	start := len(dst)
	defer st.bound(start)()
	dst = append(dst, '{')
	first := true
	for k, v := range m.All() {
		mark := len(dst)
		if !first {
			dst = append(dst, ',')
		}
		dst = st.appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = st.appendJSON(dst, v)
		if st.cutAt(dst, start) {
			dst = dst[:mark]
			st.stats.TruncatedValues++
			break
		}
		first = false
	}
	return append(dst, '}')
}

// appendJSON appends v as json.Marshal encodes v.AsRaw(), except
// that NaN and infinities, which JSON cannot represent, become the strings
// "NaN", "Infinity" and "-Infinity" as in the protobuf JSON mapping. Nesting
// depth is bounded by the decoders (100 levels for protobuf), not here.
func (st *converter) appendJSON(dst []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return st.appendJSONString(dst, v.Str())
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(dst, v.Bool())
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(dst, v.Int(), 10)
	case pcommon.ValueTypeDouble:
		return appendJSONFloat(dst, v.Double())
	case pcommon.ValueTypeBytes:
		bs := v.Bytes()
		if !st.fits(dst, base64.StdEncoding.EncodedLen(bs.Len())+2) {
			return dst
		}
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, st.rawBytes(bs, bs.Len()))
		return append(dst, '"')
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		dst = append(dst, '[')
		for i := 0; i < s.Len() && !st.over; i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = st.appendJSON(dst, s.At(i))
		}
		return append(dst, ']')
	case pcommon.ValueTypeMap:
		dst = append(dst, '{')
		first := true
		for k, e := range v.Map().All() {
			if st.over {
				break
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = st.appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = st.appendJSON(dst, e)
		}
		return append(dst, '}')
	default:
		return append(dst, "null"...)
	}
}

// appendJSONFloat formats f the way encoding/json does (ES6 number to
// string: 'f' notation unless the exponent is very small or large).
func appendJSONFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Shorten e-09 to e-9, as encoding/json does.
		n := len(dst)
		if n-start >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// jsonSafe reports whether ASCII byte b can appear unescaped in a JSON string
// under encoding/json's default HTML-safe escaping.
func jsonSafe(b byte) bool {
	return b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
}

// appendJSONString appends s as a JSON string with encoding/json's default
// escaping. Each invalid UTF-8 byte becomes \ufffd (counted as a repair, once
// per string), as encoding/json does. Within an array or map value it stops
// where the value would pass its bound (textEnd): the element is cut then.
func (st *converter) appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	repaired := false
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if jsonSafe(b) {
				i++
				continue
			}
			escape := 6 // \u00XX
			switch b {
			case '\\', '"', '\b', '\f', '\n', '\r', '\t':
				escape = 2
			}
			if !st.fits(dst, i-start+escape) {
				return dst
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				// Other control characters, and <, > and & so the JSON can
				// be embedded in HTML (the web UI shows attribute values).
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			if !st.fits(dst, i-start+6) {
				return dst
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			repaired = true
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but end lines in JavaScript.
		if r == '\u2028' || r == '\u2029' {
			if !st.fits(dst, i-start+6) {
				return dst
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	if !st.fits(dst, len(s)-start+1) {
		return dst
	}
	dst = append(dst, s[start:]...)
	if repaired {
		st.stats.RepairedStrings++
	}
	return append(dst, '"')
}
