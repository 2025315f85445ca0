package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// configDoc is the page that documents Config, key by key, with an example of each.
const configDoc = "../../docs/reference/config.md"

// fragmentMarker, on the line before a ```yaml fence, says the block is deliberately partial or
// invalid: the tests below skip it.
const fragmentMarker = "<!-- example: fragment -->"

// docExample is one ```yaml block of a Markdown page.
type docExample struct {
	Line     int // 1-based line of the opening fence
	Text     string
	Fragment bool
}

// yamlExamples returns the ```yaml blocks of md, in order.
func yamlExamples(md string) []docExample {
	var (
		out   []docExample
		cur   *docExample
		body  []string
		prev  string // the last non-blank line outside a block
		lines = strings.Split(md, "\n")
	)
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if cur != nil {
			if trimmed == "```" {
				cur.Text = strings.Join(body, "\n") + "\n"
				out = append(out, *cur)
				cur, body, prev = nil, nil, ""
				continue
			}
			body = append(body, line)
			continue
		}
		if trimmed == "```yaml" {
			cur = &docExample{Line: i + 1, Fragment: prev == fragmentMarker}
			continue
		}
		if trimmed != "" {
			prev = trimmed
		}
	}
	return out
}

func TestConfigDocYAMLExamplesExtracted(t *testing.T) {
	md := "intro\n\n```yaml\na: 1\n```\n\n" + fragmentMarker + "\n\n```yaml\n  b: [\n```\n\n```go\nc := 1\n```\n"
	assert.Equal(t, []docExample{
		{Line: 3, Text: "a: 1\n"},
		{Line: 9, Text: "  b: [\n", Fragment: true},
	}, yamlExamples(md))
}

// loadableExamples are the blocks of the config page that are not marked as fragments.
func loadableExamples(t *testing.T) []docExample {
	t.Helper()
	md, err := os.ReadFile(configDoc)
	require.NoError(t, err)
	all := yamlExamples(string(md))
	require.NotEmpty(t, all, "no ```yaml block in %s", configDoc)
	var out []docExample
	for _, ex := range all {
		if !ex.Fragment {
			out = append(out, ex)
		}
	}
	assert.LessOrEqual(t, len(all)-len(out), 3, "keep the examples marked %q few", fragmentMarker)
	return out
}

// docEnvValues are the values the page's ${VAR} references get in the test.
var docEnvValues = map[string]string{
	"AUDITOR_REPO": "https://git.example.com/ml/platform.git",
	"AUDITOR_ENV":  "prod",
}

var docEnvRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// TestConfigDocExamplesLoad loads every example of the config page, completed with the keys a
// config requires when it lacks them: each must be a valid config.
func TestConfigDocExamplesLoad(t *testing.T) {
	for _, ex := range loadableExamples(t) {
		t.Run(fmt.Sprintf("line %d", ex.Line), func(t *testing.T) {
			var top map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(ex.Text), &top), "%s:%d: not YAML", configDoc, ex.Line)
			require.NotEmpty(t, top, "%s:%d: an empty example", configDoc, ex.Line)
			data := ex.Text
			for _, kv := range [][2]string{
				{"repo", "file:///srv/git/platform"},
				{"envs", "[prod]"},
				{"stateDir", t.TempDir()},
			} {
				if _, ok := top[kv[0]]; !ok {
					data += kv[0] + ": " + kv[1] + "\n"
				}
			}
			for _, m := range docEnvRef.FindAllStringSubmatch(ex.Text, -1) {
				v, ok := docEnvValues[m[1]]
				if !ok {
					v = "example"
				}
				t.Setenv(m[1], v)
			}
			file := filepath.Join(t.TempDir(), "config.yaml")
			require.NoError(t, os.WriteFile(file, []byte(data), 0o644))
			_, err := LoadConfig(file)
			require.NoError(t, err, "%s:%d: the example does not load:\n%s", configDoc, ex.Line, data)
		})
	}
}

// TestConfigDocExamplesCoverEveryKey says every key of the config, at every depth, is set by
// some example of the config page. A type used in several places (Git credentials) needs one
// example of each of its keys, wherever it is.
func TestConfigDocExamplesCoverEveryKey(t *testing.T) {
	want := map[string]bool{}
	configKeys(reflect.TypeFor[Config](), nil, want)
	got := map[string]bool{}
	for _, ex := range loadableExamples(t) {
		var v any
		require.NoError(t, yaml.Unmarshal([]byte(ex.Text), &v), "%s:%d", configDoc, ex.Line)
		configKeys(reflect.TypeFor[Config](), v, got)
	}
	var missing []string
	for k := range want {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	slices.Sort(missing)
	assert.Empty(t, missing, "keys no example of %s sets", configDoc)
}

// TestConfigDocTablesNameRealKeys says every key the config page's tables list (their first
// column) is a key of the config or of a type it holds.
func TestConfigDocTablesNameRealKeys(t *testing.T) {
	names := map[string]bool{}
	all := map[string]bool{}
	configKeys(reflect.TypeFor[Config](), nil, all)
	for k := range all {
		names[strings.ToLower(k[strings.LastIndexByte(k, '.')+1:])] = true
	}
	md, err := os.ReadFile(configDoc)
	require.NoError(t, err)
	code := regexp.MustCompile("`([^`]+)`")
	n := 0
	for i, line := range strings.Split(string(md), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(line), "|") {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			key := m[1][strings.LastIndexByte(m[1], '.')+1:]
			n++
			assert.True(t, names[strings.ToLower(key)], "%s:%d: %q is no key of the config", configDoc, i+1, m[1])
		}
	}
	assert.Greater(t, n, 50, "the tables' keys were not found")
}

// configKeys walks type t and, when v is nil, adds every key it has to keys, as
// "<type>.<key>"; otherwise it adds the keys value v (decoded YAML) sets. Keys match as
// encoding/json matches them, case-insensitively.
func configKeys(t reflect.Type, v any, keys map[string]bool) {
	walkKeys(t, v, v == nil, keys)
}

var leafTypes = []reflect.Type{reflect.TypeFor[Duration](), reflect.TypeFor[metav1.Duration]()}

func walkKeys(t reflect.Type, v any, all bool, keys map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if slices.Contains(leafTypes, t) {
		return
	}
	switch t.Kind() {
	case reflect.Slice:
		items, _ := v.([]any)
		if all {
			items = []any{nil}
		}
		for _, item := range items {
			walkKeys(t.Elem(), item, all, keys)
		}
	case reflect.Map:
		m, _ := v.(map[string]any)
		if all {
			walkKeys(t.Elem(), nil, all, keys)
		}
		for _, item := range m {
			walkKeys(t.Elem(), item, all, keys)
		}
	case reflect.Struct:
		m, _ := v.(map[string]any)
		if !all && m == nil {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || tag == "-" || f.Type.Kind() == reflect.Func {
				continue
			}
			if f.Anonymous && tag == "" {
				walkKeys(f.Type, v, all, keys) // its fields are the outer object's
				continue
			}
			name := tag
			if name == "" {
				name = f.Name
			}
			id := t.String() + "." + name
			if all {
				keys[id] = true
				walkKeys(f.Type, nil, all, keys)
				continue
			}
			for k, item := range m {
				if strings.EqualFold(k, name) {
					keys[id] = true
					walkKeys(f.Type, item, all, keys)
				}
			}
		}
	}
}
