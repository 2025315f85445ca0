package adopt

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// TestYAMLEditKeepsTheText: an edit changes the lines of the value it writes and nothing else:
// comments, order, quoting and the other documents stay.
func TestYAMLEditKeepsTheText(t *testing.T) {
	const app = `# the api
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: api # the name
spec:
  source:
    path: charts/api
    helm:
      releaseName: api
      valuesObject:
        replicas: 2 # two
        image:
          tag: "1.0"
      parameters:
        - name: size
          value: small
  destination:
    namespace: llm
`
	tests := []struct {
		name  string
		in    string
		doc   int
		path  []step
		value any
		want  string
	}{
		{name: "scalar with a comment", in: app, path: []step{"spec", "source", "helm", "valuesObject", "replicas"}, value: int64(5),
			want: replace(app, "replicas: 2 # two", "replicas: 5 # two")},
		{name: "quoted stays quoted", in: app, path: []step{"spec", "source", "helm", "valuesObject", "image", "tag"}, value: "1.1",
			want: replace(app, `tag: "1.0"`, `tag: "1.1"`)},
		{name: "string that reads as a number is quoted", in: app, path: []step{"spec", "source", "helm", "valuesObject", "image", "tag"}, value: "2",
			want: replace(app, `tag: "1.0"`, `tag: "2"`)},
		{name: "item of a sequence", in: app, path: []step{"spec", "source", "helm", "parameters", 0, "value"}, value: "large",
			want: replace(app, "value: small", "value: large")},
		{name: "new key at the end of its mapping", in: app, path: []step{"spec", "source", "helm", "valuesObject", "image", "pullPolicy"}, value: "Always",
			want: replace(app, `          tag: "1.0"`+"\n", `          tag: "1.0"`+"\n          pullPolicy: Always\n")},
		{name: "new mappings", in: app, path: []step{"spec", "source", "helm", "valuesObject", "resources", "limits", "cpu"}, value: "2",
			want: replace(app, `          tag: "1.0"`+"\n", `          tag: "1.0"`+"\n        resources:\n          limits:\n            cpu: \"2\"\n")},
		{name: "a map replaces a scalar's line", in: app, path: []step{"spec", "source", "helm", "valuesObject", "replicas"}, value: map[string]any{"min": int64(1)},
			want: replace(app, "        replicas: 2 # two\n", "        replicas:\n          min: 1\n")},
		{name: "a mapping replaced", in: app, path: []step{"spec", "source", "helm", "valuesObject", "image"}, value: map[string]any{"tag": "2"},
			want: replace(app, "        image:\n          tag: \"1.0\"\n", "        image:\n          tag: \"2\"\n")},
		{name: "key of the top mapping", in: "a: 1\n# end\n", path: []step{"b"}, value: int64(2), want: "a: 1\nb: 2\n# end\n"},
		{name: "no newline at the end", in: "a:\n  b: 1", path: []step{"a", "c"}, value: int64(2), want: "a:\n  b: 1\n  c: 2\n"},
		{name: "empty flow mapping", in: "helm:\n  valuesObject: {}\n  releaseName: x\n", path: []step{"helm", "valuesObject", "replicas"}, value: int64(3),
			want: "helm:\n  valuesObject:\n    replicas: 3\n  releaseName: x\n"},
		{name: "null value", in: "helm:\nother: 1\n", path: []step{"helm", "valuesObject", "replicas"}, value: int64(3),
			want: "helm:\n  valuesObject:\n    replicas: 3\nother: 1\n"},
		{name: "compact sequence", in: "images:\n- a:1\n- b:2\nnext: x\n", path: []step{"images", 1}, value: "b:3",
			want: "images:\n- a:1\n- b:3\nnext: x\n"},
		{name: "flow mapping item", in: "replicas: [{name: api, count: 2}]\n", path: []step{"replicas", 0, "count"}, value: int64(4),
			want: "replicas: [{name: api, count: 4}]\n"},
		{name: "second document", in: "a: 1\n---\n# b\nb:\n  c: 1\n", doc: 1, path: []step{"b", "c"}, value: int64(2),
			want: "a: 1\n---\n# b\nb:\n  c: 2\n"},
		{name: "literal block", in: "values: |\n  replicas: 2\n  tier: gold\nnext: 1\n", path: []step{"values"}, value: "replicas: 5\ntier: gold\n",
			want: "values: |\n  replicas: 5\n  tier: gold\nnext: 1\n"},
		{name: "flow mapping gets a key (encoded again)", in: "a: {b: 1}\n", path: []step{"a", "c"}, value: int64(2),
			want: "a: {b: 1, c: 2}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &yamlEdit{name: "f.yaml", data: []byte(tt.in)}
			require.NoError(t, e.set(tt.doc, tt.path, tt.value))
			if d := cmp.Diff(tt.want, string(e.data)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestYAMLEditRefusesWhatItCannotWrite(t *testing.T) {
	e := &yamlEdit{name: "f.yaml", data: []byte("a: [1, 2]\n")}
	require.Error(t, e.set(0, []step{"a", "b"}, 1), "a list has no keys")
	require.Error(t, e.set(1, []step{"a"}, 1), "no second document")
}

// replace replaces the first old in s, which must hold it.
func replace(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic("no " + old)
	}
	return strings.Replace(s, old, new, 1)
}
