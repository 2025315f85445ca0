package doccheck

import (
	"regexp"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// leafValues are the values of charts/auditor that the install page documents as one: a map a
// user replaces whole.
var leafValues = map[string]bool{"resources": true}

// flatten lists the dotted keys of values: a map is walked, unless empty or a leaf value.
func flatten(prefix string, v any, out map[string]bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 || leafValues[prefix] {
		out[prefix] = true
		return
	}
	for k, child := range m {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		flatten(key, child, out)
	}
}

var valueRow = regexp.MustCompile("(?m)^\\| `([A-Za-z.]+)` \\|")

// TestInstallPageDocumentsEveryChartValue: the values table of docs/install.md names each key
// of charts/auditor/values.yaml, and no other.
func TestInstallPageDocumentsEveryChartValue(t *testing.T) {
	var values map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(read(t, "charts/auditor/values.yaml")), &values))
	want := map[string]bool{}
	flatten("", values, want)
	page := read(t, "docs/install.md")
	section := regexp.MustCompile(`(?s)\n## Values\n(.*?)\n## `).FindStringSubmatch(page)
	require.NotNil(t, section, "docs/install.md has a section \"Values\"")
	got := map[string]bool{}
	for _, m := range valueRow.FindAllStringSubmatch(section[1], -1) {
		got[m[1]] = true
	}
	if diff := cmp.Diff(sorted(want), sorted(got)); diff != "" {
		t.Errorf("values.yaml (-) and the table of docs/install.md (+) differ:\n%s", diff)
	}
}

func sorted(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
