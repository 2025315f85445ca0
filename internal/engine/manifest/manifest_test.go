package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecode(t *testing.T) {
	objs, err := Decode([]byte("# header\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n" +
		`{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b"}}` + "\n"))
	require.NoError(t, err)
	require.Len(t, objs, 2)
	assert.Equal(t, "ConfigMap", objs[0].GetKind())
	assert.Equal(t, "b", objs[1].GetName())

	_, err = Decode([]byte("metadata: {name: c}\n"))
	assert.ErrorContains(t, err, `document without apiVersion/kind (name "c")`)
	_, err = Decode([]byte("kind: [\n"))
	assert.ErrorContains(t, err, "decode YAML")
}
