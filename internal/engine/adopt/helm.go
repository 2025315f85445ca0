package adopt

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/strvals"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// helmSource is a chart of this repository that an Application's source renders: spec.source,
// or spec.sources[j] of a multi-source one.
type helmSource struct {
	m     appManifest
	chart string
}

// options are the helm options the Application renders the chart with, as Argo CD's
// repo-server takes them (without the cluster's version: the render is compared with itself).
func (h helmSource) options(t *tree) (*render.HelmOptions, map[string]any, error) {
	app, obj, err := h.m.app(t)
	if err != nil {
		return nil, nil, err
	}
	src := lookupPath(obj, h.m.source)
	helm, _ := lookupPath(src, []step{"helm"}).(map[string]any)
	if len(h.m.source) < 3 {
		return app.HelmOptions(t.snap.Revision, argocd.Cluster{}), helm, nil
	}
	j := h.m.source[2].(int)
	opts := app.SourceHelmOptions(j, t.snap.Revision, argocd.Cluster{})
	for _, f := range opts.ValueFiles {
		if p, ok := refFile(app, f); ok {
			if data, ok := t.file(p); ok {
				if opts.RefValues == nil {
					opts.RefValues = map[string]string{}
				}
				opts.RefValues[f] = string(data)
			}
		}
	}
	return opts, helm, nil
}

// refFile is the repository path of a value file of another source ($ref/path), when the
// Application has that ref.
func refFile(app *argocd.App, f string) (string, bool) {
	ref, rest, ok := strings.Cut(f, "/")
	if !ok || !strings.HasPrefix(ref, "$") {
		return "", false
	}
	for _, s := range app.Sources {
		if s.Ref != "" && "$"+s.Ref == ref {
			return path.Clean(strings.TrimPrefix(rest, "/")), true
		}
	}
	return "", false
}

func (h helmSource) render(t *tree) (*render.Result, error) {
	opts, _, err := h.options(t)
	if err != nil {
		return nil, err
	}
	return t.render(render.AppTarget(h.chart), render.Variant{Helm: opts})
}

// Where a value of a chart comes from, in the order Argo CD merges them.
const (
	chartValues = iota
	valueFile
	appValues
	parameter
	fileParameter
)

// layer is one source of a chart's values: its values.yaml, a value file, the Application's
// values or valuesObject, one of its parameters.
type layer struct {
	kind   int
	where  string // a file's path, "valuesObject", "values" or the parameter's name
	index  int    // a parameter's index in helm.parameters
	values map[string]any
}

// layers are the chart's values as Argo CD merges them, each where it is set.
func (h helmSource) layers(t *tree) ([]layer, map[string]any, error) {
	opts, helm, err := h.options(t)
	if err != nil {
		return nil, nil, err
	}
	var out []layer
	load := func(kind int, where, text string) error {
		m, err := chartloader.LoadValues(strings.NewReader(text))
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		out = append(out, layer{kind: kind, where: where, values: m})
		return nil
	}
	data, _ := t.file(path.Join(h.chart, "values.yaml"))
	if err := load(chartValues, path.Join(h.chart, "values.yaml"), string(data)); err != nil {
		return nil, nil, err
	}
	src, err := t.source()
	if err != nil {
		return nil, nil, err
	}
	files, err := src.HelmValueFiles(h.chart, opts)
	if err != nil {
		return nil, nil, err
	}
	app, _, err := h.m.app(t)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range files {
		text, where := opts.RefValues[f], f
		if p, ok := refFile(app, f); ok {
			where = p
		} else {
			data, _ := t.file(f)
			text = string(data)
		}
		if err := load(valueFile, where, text); err != nil {
			return nil, nil, err
		}
	}
	which := "valuesObject"
	if helm["valuesObject"] == nil && strings.TrimSpace(opts.Values) != "" {
		which = "values"
	}
	if err := load(appValues, which, opts.Values); err != nil {
		return nil, nil, err
	}
	for _, force := range []bool{false, true} {
		for i, p := range opts.Parameters {
			if p.ForceString != force {
				continue
			}
			m := map[string]any{}
			parse := strvals.ParseInto
			if force {
				parse = strvals.ParseIntoString
			}
			if err := parse(p.Name+"="+escapeCommas(p.Value), m); err != nil {
				return nil, nil, fmt.Errorf("helm parameter %s: %w", p.Name, err)
			}
			out = append(out, layer{kind: parameter, where: p.Name, index: i, values: m})
		}
	}
	for _, p := range opts.FileParameters {
		m := map[string]any{}
		if err := strvals.ParseInto(p.Name+"=file", m); err == nil {
			out = append(out, layer{kind: fileParameter, where: p.Name, values: m})
		}
	}
	merged := map[string]any{}
	for _, l := range out {
		merged = chartloader.MergeMaps(merged, l.values)
	}
	return out, merged, nil
}

// escapeCommas escapes commas in a --set value as Argo CD does, except in a {a,b} list.
func escapeCommas(v string) string {
	if strings.HasPrefix(v, "{") && strings.HasSuffix(v, "}") {
		return v
	}
	return strings.ReplaceAll(strings.ReplaceAll(v, `\,`, ","), ",", `\,`)
}

// candidates are the chart values that may set field f of o: those whose value is Git's value
// of the field, set to its live value; when none, those whose string value is the part of
// Git's value that the live value changes (an image's tag).
func (h helmSource) candidates(t *tree, o drift.Object, f drift.Field) ([]candidate, error) {
	layers, merged, err := h.layers(t)
	if err != nil {
		return nil, err
	}
	var exact, part []candidate
	walkValues(merged, nil, func(key []string, v any) {
		top := -1
		for i, l := range layers {
			if _, ok := lookupKey(l.values, key); ok {
				top = i
			}
		}
		if top < 0 || layers[top].kind == fileParameter {
			return
		}
		if equalValue(v, f.Desired) || scalar(v) && scalar(f.Desired) && fmt.Sprint(normal(v)) == fmt.Sprint(normal(f.Desired)) {
			exact = append(exact, h.candidate(t, layers[top], key, retype(v, f.Live)))
			return
		}
		if w, ok := changedPart(v, f.Desired, f.Live); ok {
			c := h.candidate(t, layers[top], key, w)
			c.part = true
			part = append(part, c)
		}
	})
	return append(exact, part...), nil
}

// candidate sets key to value where l sets it: the parameter, the value file, the
// Application's values; a value only the chart's values.yaml sets, or a value file another
// Application reads too (the chart's values.yaml listed, a file two Applications list), goes
// into the Application's valuesObject (or its values, when that is what it uses), which Argo CD
// merges over every value file.
func (h helmSource) candidate(t *tree, l layer, key []string, value any) candidate {
	dotted := strings.Join(key, ".")
	c := candidate{key: dotted}
	kind, shared := l.kind, ""
	if kind == valueFile {
		if shared = h.sharedValueFile(t, l.where); shared != "" {
			kind = appValues
		}
	}
	switch kind {
	case parameter:
		c.where = "helm parameter " + l.where + " of the Application in " + h.m.file
		c.apply = func(t *tree) (*tree, error) {
			return h.m.set(t, []step{"helm", "parameters", l.index, "value"}, fmt.Sprint(value))
		}
	case valueFile:
		c.where = "value file " + l.where
		c.apply = func(t *tree) (*tree, error) {
			data, _ := t.file(l.where)
			out, err := setValue(l.where, data, key, value)
			if err != nil {
				return nil, err
			}
			return t.with(l.where, out), nil
		}
	default:
		c.where = "helm values of the Application in " + h.m.file
		if shared != "" {
			c.where += ", not value file " + l.where + ": " + shared
		}
		c.apply = func(t *tree) (*tree, error) {
			_, helm, err := h.options(t)
			if err != nil {
				return nil, err
			}
			// A valuesObject that is there but null leaves the values string in force: a value
			// goes into the string then, as a valuesObject made would disable it.
			values, isString := helm["values"].(string)
			if helm["valuesObject"] != nil || !isString || strings.TrimSpace(values) == "" {
				return h.m.set(t, append([]step{"helm", "valuesObject"}, steps(key)...), value)
			}
			out, err := setValue("helm.values", []byte(values), key, value)
			if err != nil {
				return nil, err
			}
			if !strings.HasSuffix(values, "\n") { // a |- block stays one
				out = bytes.TrimRight(out, "\n")
			}
			return h.m.set(t, []step{"helm", "values"}, string(out))
		}
	}
	return c
}

// setValue sets key in a values file's text (an empty one gets its first key).
func setValue(name string, data []byte, key []string, value any) ([]byte, error) {
	if strings.TrimSpace(string(data)) == "" {
		data = []byte("{}\n")
	}
	e := &yamlEdit{name: name, data: data}
	if err := e.set(0, steps(key), value); err != nil {
		return nil, err
	}
	return e.data, nil
}

func steps(key []string) []step {
	out := make([]step, len(key))
	for i, k := range key {
		out[i] = k
	}
	return out
}

// walkValues calls fn for every key of a values map (maps are walked into; lists are values).
func walkValues(m map[string]any, prefix []string, fn func(key []string, v any)) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		key := append(slices.Clone(prefix), k)
		fn(key, m[k])
		if sub, ok := m[k].(map[string]any); ok {
			walkValues(sub, key, fn)
		}
	}
}

func lookupKey(m map[string]any, key []string) (any, bool) {
	var cur any = m
	for _, k := range key {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// lookupPath is the value at path in v (nil when not there).
func lookupPath(v any, p []step) any {
	for _, s := range p {
		switch s := s.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[s]
		case int:
			l, _ := v.([]any)
			if s >= len(l) {
				return nil
			}
			v = l[s]
		}
	}
	return v
}

func scalar(v any) bool {
	switch normal(v).(type) {
	case string, float64, bool:
		return true
	}
	return false
}

// retype is the live value in the type of the value it replaces: a chart's template may quote a
// number or print a string bare.
func retype(old, live any) any {
	s, isString := live.(string)
	switch normal(old).(type) {
	case string:
		if !isString && scalar(live) {
			return fmt.Sprint(normal(live))
		}
	case float64, bool:
		if isString {
			var v any
			if err := yamlUnmarshal(s, &v); err == nil && scalar(v) {
				return v
			}
		}
	}
	return live
}

// changedPart is what a string value v becomes when the live value changes only the part of
// Git's value that v makes: desired is prefix+v+suffix, live is prefix+w+suffix.
func changedPart(v, desired, live any) (string, bool) {
	s, ok1 := v.(string)
	d, ok2 := desired.(string)
	l, ok3 := live.(string)
	if !ok1 || !ok2 || !ok3 || len(s) < 2 || s == d || strings.Count(d, s) != 1 {
		return "", false
	}
	i := strings.Index(d, s)
	pre, suf := d[:i], d[i+len(s):]
	if !strings.HasPrefix(l, pre) || !strings.HasSuffix(l, suf) || len(l) < len(pre)+len(suf) {
		return "", false
	}
	w := l[len(pre) : len(l)-len(suf)]
	return w, w != s && w != ""
}

func yamlUnmarshal(s string, v *any) error { return yaml.Unmarshal([]byte(s), v) }
