package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// reportFormats are the -o formats of every command that reports; a command may add its own
// (check's markdown, diff's patch).
var reportFormats = []string{"text", "json", "yaml"}

// outputFlag is the value of a command's -o: one of the formats it offers, checked as the flag is
// parsed, so an unknown format is a flag error (exit code 2) naming the valid ones.
type outputFlag struct {
	p       *string
	formats []string
}

func (f *outputFlag) String() string { return *f.p }

// Type names the value in the help: "-o, --output format".
func (f *outputFlag) Type() string { return "format" }

// Set accepts one of the command's formats.
func (f *outputFlag) Set(s string) error {
	if !slices.Contains(f.formats, s) {
		return fmt.Errorf("unknown output format %q (want %s)", s, orList(f.formats))
	}
	*f.p = s
	return nil
}

// addOutputFlag adds -o/--output to cmd, bound to p: one of formats (the first is the default),
// with note, when given, saying what the command's own formats do.
func addOutputFlag(cmd *cobra.Command, p *string, note string, formats ...string) {
	*p = formats[0]
	usage := "output format: " + orList(formats)
	if note != "" {
		usage += " (" + note + ")"
	}
	cmd.Flags().VarP(&outputFlag{p: p, formats: formats}, "output", "o", usage)
}

// addReportOutput is addOutputFlag with the formats of every report: text, json and yaml.
func addReportOutput(cmd *cobra.Command, p *string) {
	addOutputFlag(cmd, p, "", reportFormats...)
}

// orList is "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// writeReport writes v as JSON or YAML as format asks; any other format is text's.
func writeReport(w io.Writer, format string, v any, text func() error) error {
	switch format {
	case "json":
		return writeJSON(w, v)
	case "yaml":
		return writeYAML(w, v)
	}
	return text()
}

// writeJSON writes v as indented JSON, as every -o json does.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeYAML writes v as YAML, as every -o yaml does: the JSON fields' names and values.
func writeYAML(w io.Writer, v any) error {
	data, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode YAML: %w", err)
	}
	_, err = w.Write(data)
	return err
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
