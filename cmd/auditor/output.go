package main

import (
	"encoding/json"
	"io"

	"github.com/llm-gitops/platform/internal/drift"
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

// short is a value on one line, cut to 60 characters.
func short(v any) string { return drift.ShortValue(v, 60) }

// objectID names an object as "Kind namespace/name", or "Kind name" when cluster-scoped.
func objectID(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}
