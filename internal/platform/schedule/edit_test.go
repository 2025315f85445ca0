package schedule

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSetFieldKeepsBytes: documents are where the YAML library's decoder says (markers with
// comments, an end marker, an empty document), and the edit changes the value's bytes only.
func TestSetFieldKeepsBytes(t *testing.T) {
	const file = `# scaling
apiVersion: v1
kind: ConfigMap
metadata: {name: notes}
data:
  notes: |
    one
...
---
---   # the third document
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: vllm-qwen
spec:
  minReplicaCount:   2   # floor
  maxReplicaCount: 8
`
	tg := Target{Path: "scaling.yaml", Kind: "ScaledObject", Name: "vllm-qwen", Field: "spec.minReplicaCount"}
	out, from, line, err := setField([]byte(file), tg, 12)
	require.NoError(t, err)
	assert.Equal(t, int64(2), from)
	assert.Equal(t, 16, line)
	assert.Equal(t, strings.Replace(file, "minReplicaCount:   2   #", "minReplicaCount:   12   #", 1), string(out))

	loc, err := lookup(out, tg)
	require.NoError(t, err)
	assert.Equal(t, location{line: 16, value: 12, max: 8, maxLine: 17}, loc)

	_, err = lookup([]byte(file+"---\nkind: ScaledObject\nmetadata: {name: vllm-qwen}\n"), tg)
	assert.ErrorContains(t, err, "defined twice (lines 11 and 19)")
}

// TestParseDocsBoundaries: a document spans from its "---" line (the first one from the file's
// start) to the line before the next document's.
func TestParseDocsBoundaries(t *testing.T) {
	docs, err := parseDocs("f.yaml", []byte("# c\na: 1\n---\nb: 2\n--- # x\n# y\nc: 3\n"))
	require.NoError(t, err)
	var spans [][2]int
	for _, d := range docs {
		spans = append(spans, [2]int{d.start, d.end})
	}
	assert.Equal(t, [][2]int{{1, 2}, {3, 4}, {5, 7}}, spans)
	assert.Equal(t, 7, docs[2].rn.YNode().Line)

	_, err = parseDocs("f.yaml", []byte("a: 1\n---\nb: [\n"))
	assert.ErrorContains(t, err, "f.yaml: parse: ")
}
