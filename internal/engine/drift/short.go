package drift

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// ShortValue is a field value on one line for tables and terminals: a string as it is, anything
// else as JSON, "(none)" for nil, line breaks shown as ⏎, cut to n characters (runes) with "…".
func ShortValue(v any, n int) string {
	if v == nil {
		return "(none)"
	}
	s, ok := v.(string)
	if !ok {
		b, _ := json.Marshal(v)
		s = string(b)
	}
	return Cut(strings.ReplaceAll(s, "\n", "⏎"), n)
}

// Cut shortens s to n characters (runes, so a multi-byte character is never split), ending in
// "…" when it was longer.
func Cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
