package adopt

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A JSON patch is written and listed with its target once; written again, the file is replaced
// and the kustomization left as it is.
func TestJSONPatchIsListedOnce(t *testing.T) {
	files := map[string]string{"overlays/prod/kustomization.yaml": "resources:\n  - ../../base\npatches:\n  - path: scaling.yaml # capacity\n"}
	read := func(name string) ([]byte, error) {
		if d, ok := files[name]; ok {
			return []byte(d), nil
		}
		return nil, fs.ErrNotExist
	}
	target := Target{Kind: "ScaledObject", Name: "vllm-qwen", Namespace: "llm-inference"}
	ops := func(v string) []Op {
		return []Op{{Op: "test", Path: "/spec/triggers/0/name", Value: "queue-depth"}, {Op: "replace", Path: "/spec/triggers/0/metadata/threshold", Value: v}}
	}
	a, err := JSONPatch("overlays/prod", read, "profile-qwen.yaml", target, []string{"from the profile"}, ops("4"))
	require.NoError(t, err)
	assert.Equal(t, "resources:\n  - ../../base\npatches:\n  - path: scaling.yaml # capacity\n  - path: profile-qwen.yaml\n    target:\n      kind: ScaledObject\n      name: vllm-qwen\n      namespace: llm-inference\n",
		string(a.Files["overlays/prod/kustomization.yaml"]))
	assert.Equal(t, "# from the profile\n- op: test\n  path: /spec/triggers/0/name\n  value: queue-depth\n- op: replace\n  path: /spec/triggers/0/metadata/threshold\n  value: \"4\"\n",
		string(a.Files["overlays/prod/profile-qwen.yaml"]))
	for p, d := range a.Files {
		files[p] = string(d)
	}

	again, err := JSONPatch("overlays/prod", read, "profile-qwen.yaml", target, []string{"from the profile"}, ops("3"))
	require.NoError(t, err)
	assert.NotContains(t, again.Files, "overlays/prod/kustomization.yaml", "listed already")
	assert.Contains(t, string(again.Files["overlays/prod/profile-qwen.yaml"]), `value: "3"`)
	assert.Equal(t, 1, strings.Count(again.Diff, "diff --git"), again.Diff)
}
