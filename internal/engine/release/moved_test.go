package release

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// TestMovedSince: a --direct promotion checked at one tree is refused when the branch moved in
// anything the check reads; a model ledger or another env's release file does not count.
func TestMovedSince(t *testing.T) {
	checked := &gitrepo.Snapshot{Revision: "a", Files: map[string][]byte{
		"apps/prod/release.yaml": []byte("r: 1"), "apps/staging/release.yaml": []byte("r: 1"),
		"overlays/prod/kustomization.yaml": []byte("k: 1"), "clusters/prod/model-ledger.jsonl": []byte("{}"),
		"clusters/prod/profiles/qwen.yaml": []byte("p: 1"), "clusters/prod/schedule.yaml": []byte("s: 1"),
	}}
	with := func(name, data string) *gitrepo.Snapshot {
		files := map[string][]byte{}
		for k, v := range checked.Files {
			files[k] = v
		}
		files[name] = []byte(data)
		return &gitrepo.Snapshot{Revision: "b", Files: files}
	}
	cases := []struct {
		name, file string
		want       []string
	}{
		{"a ledger record", "clusters/prod/model-ledger.jsonl", nil},
		{"staging promoted", "apps/staging/release.yaml", nil},
		{"prod's traffic profile", "clusters/prod/profiles/qwen.yaml", []string{"clusters/prod/profiles/qwen.yaml"}},
		{"prod's schedule", "clusters/prod/schedule.yaml", []string{"clusters/prod/schedule.yaml"}},
		{"prod's overlay", "overlays/prod/kustomization.yaml", []string{"overlays/prod/kustomization.yaml"}},
		{"a new Application", "apps/prod/extra.yaml", []string{"apps/prod/extra.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, movedSince(checked, with(tc.file, "changed"), "prod"))
		})
	}
	assert.Nil(t, movedSince(nil, checked, "prod"), "nothing checked: nothing to compare")
	assert.Nil(t, movedSince(checked, checked, "prod"))
}
