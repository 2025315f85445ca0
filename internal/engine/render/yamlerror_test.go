package render

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A YAML error names the line of the mistake, not the first line of the block it is in.
func TestCheckYAMLPointsAtTheBadLine(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		line       int
		msg        string
	}{
		{"indent out of its mapping", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  a: b\n c: d\n",
			7, "did not find expected key"},
		{"mapping value in a scalar", "- op: replace\n  path: /a\n  value: 1\n- op: replace\n   path: /b\n",
			5, "mapping values are not allowed in this context"},
		{"unclosed flow sequence", "a:\n  b: [1, 2\n  c: 3\nd: 4\n",
			3, "did not find expected ',' or ']'"},
		{"second document", "a: 1\n---\nb: 2\n  c: 3\n", 4, "mapping values are not allowed in this context"},
		{"key without a colon", "a: b\nc\nd: e\n", 2, "could not find expected ':'"},
		{"unquoted alias-like value", "hosts:\n  - *.example.com\n", 2, "did not find expected alphabetic or numeric character"},
		{"deep bad indent", "spec:\n  template:\n    metadata:\n      labels:\n        a: b\n       c: d\n", 6, "did not find expected key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkYAML("overlays/dev/patch.yaml", []byte(tc.data))
			var ye *YAMLError
			require.True(t, errors.As(err, &ye), "%v", err)
			assert.Equal(t, tc.line, ye.Line, ye.Error())
			assert.Contains(t, ye.Msg, tc.msg)
			assert.Equal(t, "overlays/dev/patch.yaml", ye.File)
		})
	}
	assert.NoError(t, checkYAML("ok.yaml", []byte("a: 1\n---\nb: [1, 2]\n")))
}
