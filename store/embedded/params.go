package embedded

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/budgetd/budgetd/store/chsql"
)

// bindParams renders parameters into the names and values
// chdb_query_with_params takes. Values travel outside the SQL text; the
// engine reads each in its escaped text form, which is what escapeParam
// produces, so any byte sequence arrives intact and never changes the query.
func bindParams(params chsql.Params) (names, values []string, err error) {
	if len(params) == 0 {
		return nil, nil, nil
	}
	names = make([]string, len(params))
	values = make([]string, len(params))
	for i, p := range params {
		names[i] = p.Name
		switch v := p.Value.(type) {
		case string:
			values[i] = escapeParam(v)
		case uint64:
			values[i] = strconv.FormatUint(v, 10)
		case int64:
			values[i] = strconv.FormatInt(v, 10)
		case int:
			values[i] = strconv.Itoa(v)
		case float64:
			values[i] = strconv.FormatFloat(v, 'g', -1, 64)
		default:
			return nil, nil, fmt.Errorf("bind parameter %s: unsupported type %T", p.Name, p.Value)
		}
	}
	return names, values, nil
}

// paramEscaper escapes the characters ClickHouse's escaped text format
// treats specially: backslash starts an escape, tab and newline end a field,
// and a NUL cannot pass through the C API's NUL-terminated strings.
var paramEscaper = strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`, "\x00", `\0`)

func escapeParam(s string) string { return paramEscaper.Replace(s) }
