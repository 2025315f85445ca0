package schedule

import (
	"errors"

	"gopkg.in/yaml.v3"
)

// The schedule file as written, decoded by yaml.v3 (decode.go) and checked by the validator
// (validate.go). Values with a syntax of their own (durations, sizes, bandwidths, dates, cron
// expressions, time zones) stay strings here so that the validator reports them with the
// field's name; every value keeps its position for the validator's errors.

type fileYAML struct {
	LeadTime at[leadTimeYAML]       `yaml:"leadTime"`
	Peaks    at[list[at[peakYAML]]] `yaml:"peaks"`
}

type leadTimeYAML struct {
	ArgoSyncDelay at[string]    `yaml:"argoSyncDelay"`
	ColdStart     coldStartYAML `yaml:"coldStart"`
	Margin        at[string]    `yaml:"margin"`
}

type coldStartYAML struct {
	NodeProvisioning  at[string] `yaml:"nodeProvisioning"`
	ImageSize         at[string] `yaml:"imageSize"`
	PullBandwidth     at[string] `yaml:"pullBandwidth"`
	WeightsSize       at[string] `yaml:"weightsSize"`
	DownloadBandwidth at[string] `yaml:"downloadBandwidth"`
	LoadBandwidth     at[string] `yaml:"loadBandwidth"`
	LoadTime          at[string] `yaml:"loadTime"`
	EngineInit        at[string] `yaml:"engineInit"`
}

type peakYAML struct {
	Name       at[string]          `yaml:"name"`
	Recurrence at[recurrenceYAML]  `yaml:"recurrence"`
	Exclude    list[at[rangeYAML]] `yaml:"exclude"`
	Duration   at[string]          `yaml:"duration"`
	Target     at[targetYAML]      `yaml:"target"`
	Warm       at[int64]           `yaml:"warm"`
}

type recurrenceYAML struct {
	Cron          at[string]       `yaml:"cron"`
	TimeZone      at[string]       `yaml:"timeZone"`
	DaysOfMonth   list[at[int64]]  `yaml:"daysOfMonth"`
	WeekendPolicy at[string]       `yaml:"weekendPolicy"`
	Dates         list[at[string]] `yaml:"dates"`
	At            at[string]       `yaml:"at"`
}

// rangeYAML is an exclude entry: "2027-01-01", "2027-01-01..2027-01-08" (in From) or
// {from: ..., to: ...}.
type rangeYAML struct {
	From at[string] `yaml:"from"`
	To   at[string] `yaml:"to"`
	// Mapping is true for the {from, to} form.
	Mapping bool `yaml:"-"`
}

type targetYAML struct {
	Path      at[string] `yaml:"path"`
	Kind      at[string] `yaml:"kind"`
	Name      at[string] `yaml:"name"`
	Namespace at[string] `yaml:"namespace"`
	Field     at[string] `yaml:"field"`
}

// UnmarshalYAML decodes a scalar into From, a mapping strictly into From and To.
func (r *rangeYAML) UnmarshalYAML(unmarshal func(any) error) error {
	var n node
	if err := unmarshal(&n); err != nil {
		return err
	}
	if n.kind != yaml.MappingNode {
		return unmarshal(&r.From)
	}
	r.Mapping = true
	return unmarshal((*rangeFields)(r))
}

// rangeFields is rangeYAML without its UnmarshalYAML, decoded as a plain struct (with the
// decoder's KnownFields).
type rangeFields rangeYAML

// at is a decoded value and the position of its YAML node; Line is 0 when the key is absent
// (or null). The obsolete-style UnmarshalYAML is deliberate: its unmarshal function decodes
// with the calling decoder, so KnownFields and the collection of type errors carry through.
type at[T any] struct {
	V            T
	Line, Column int
	bad          bool // V did not decode: a type error was reported
}

// UnmarshalYAML records the node's position, then decodes the value.
func (a *at[T]) UnmarshalYAML(unmarshal func(any) error) error {
	var n node
	if err := unmarshal(&n); err != nil {
		return err
	}
	a.Line, a.Column = n.line, n.column
	if err := unmarshal(&a.V); err != nil {
		a.bad = true
		return err
	}
	return nil
}

// set reports whether the key was in the file.
func (a at[T]) set() bool { return a.Line > 0 }

// ok reports whether the key was in the file and its value decoded.
func (a at[T]) ok() bool { return a.Line > 0 && !a.bad }

// list is a YAML sequence in which a single scalar counts as a one-item list.
type list[T any] []T

// UnmarshalYAML decodes a sequence, or a scalar as a one-item list. Items are decoded one by one
// so that an item with a type error is kept (yaml.v3 drops it from a slice) for the validator,
// while the error is still reported.
func (l *list[T]) UnmarshalYAML(unmarshal func(any) error) error {
	var n node
	if err := unmarshal(&n); err != nil {
		return err
	}
	if n.kind == yaml.ScalarNode {
		var one T
		err := unmarshal(&one)
		*l = list[T]{one}
		return err
	}
	var items []deferred
	if err := unmarshal(&items); err != nil {
		return err
	}
	*l = make(list[T], 0, len(items))
	var errs []string
	for _, it := range items {
		var v T
		if err := it.unmarshal(&v); err != nil {
			var te *yaml.TypeError
			if !errors.As(err, &te) {
				return err
			}
			errs = append(errs, te.Errors...)
		}
		*l = append(*l, v)
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	return nil
}

// deferred keeps the decoder's unmarshal function of a sequence item, to decode it later (within
// the same Decode call).
type deferred struct{ unmarshal func(any) error }

// UnmarshalYAML keeps unmarshal.
func (d *deferred) UnmarshalYAML(unmarshal func(any) error) error {
	d.unmarshal = unmarshal
	return nil
}

// node is the kind and position of a YAML node. Decoding into it (through the unmarshal
// function of an obsolete-style UnmarshalYAML) reads the node without consuming it: decoding
// into *yaml.Node itself does not work there, as yaml.v3 only special-cases yaml.Node values.
type node struct {
	kind         yaml.Kind
	line, column int
}

// UnmarshalYAML records the node's kind and position.
func (n *node) UnmarshalYAML(y *yaml.Node) error {
	n.kind, n.line, n.column = y.Kind, y.Line, y.Column
	return nil
}
