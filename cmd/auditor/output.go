package main

import (
	"encoding/json"
	"io"
	"strings"
	"unicode/utf8"
)

// checkOutputFormat accepts -o text and -o json.
func checkOutputFormat(o string) error {
	if o != "text" && o != "json" {
		return usageErr("unknown output format %q (want text or json)", o)
	}
	return nil
}

// writeJSON writes v as indented JSON, as every -o json does.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// short is a value on one line: strings as they are, others as JSON, cut to 60 characters
// (runes, so a multi-byte character is never split).
func short(v any) string {
	if v == nil {
		return "(none)"
	}
	s, ok := v.(string)
	if !ok {
		b, _ := json.Marshal(v)
		s = string(b)
	}
	s = strings.ReplaceAll(s, "\n", " ")
	if utf8.RuneCountInString(s) > 60 {
		s = string([]rune(s)[:57]) + "..."
	}
	return s
}

// objectID names an object as "Kind namespace/name", or "Kind name" when cluster-scoped.
func objectID(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}
