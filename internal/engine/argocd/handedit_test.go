package argocd

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHandEditDisables(t *testing.T) {
	for _, tc := range []struct {
		path string
		live any
		want string
	}{
		{".spec.syncPolicy.automated", nil, "automated sync"},
		{".spec.syncPolicy", nil, "automated sync"},
		{".spec.syncPolicy.automated.selfHeal", false, "self-heal"},
		{".spec.syncPolicy.automated.selfHeal", nil, "self-heal"},
		{".spec.syncPolicy.automated.selfHeal", true, ""},
		{".spec.syncPolicy.automated.prune", false, "prune"},
		{".spec.syncPolicy.automated.enabled", false, "automated sync"},
		{".spec.source.targetRevision", "hotfix", "following Git's revision"},
		{".spec.sources[0].targetRevision", "v2", "following Git's revision"},
		{".spec.ignoreDifferences", []any{}, "part of Argo CD's comparison"},
		{".spec.destination.namespace", "x", ""},
	} {
		got := HandEditDisables(tc.path, tc.live)
		if tc.want == "" {
			assert.Empty(t, got, tc.path)
			continue
		}
		assert.Contains(t, got, tc.want, "%s = %v", tc.path, tc.live)
	}
}
