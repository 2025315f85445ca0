package render

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"
)

// levelFor is the level the policy's first matching rule gives a request (users and namespaces
// aside: the platform's rules match on verbs and resources only).
func levelFor(p *auditv1.Policy, verb, group, resource string) auditv1.Level {
	for _, r := range p.Rules {
		if len(r.Verbs) > 0 && !slices.Contains(r.Verbs, verb) {
			continue
		}
		if len(r.Resources) == 0 {
			return r.Level
		}
		for _, gr := range r.Resources {
			if gr.Group != group {
				continue
			}
			if len(gr.Resources) == 0 || slices.Contains(gr.Resources, resource) {
				return r.Level
			}
		}
	}
	return auditv1.LevelNone
}

// TestAuditPolicyLogsEveryKindTheEnvsManage: a hand edit to any object an env renders is logged
// with its bodies (RequestResponse), so the auditor can name its person; a Secret's only with
// its metadata. A kind added to the platform without a rule would be edited anonymously.
func TestAuditPolicyLogsEveryKindTheEnvsManage(t *testing.T) {
	data, err := os.ReadFile("../../../clusters/audit-policy.yaml")
	require.NoError(t, err)
	var policy auditv1.Policy
	require.NoError(t, yaml.UnmarshalStrict(data, &policy))
	src, err := FromDir("../../..")
	require.NoError(t, err)
	envs, err := src.Envs()
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, env := range envs {
		res, err := Engine{}.Render(context.Background(), src, Target{Name: env})
		require.NoError(t, err, env)
		for _, o := range res.Objects {
			gvk := o.GroupVersionKind()
			plural, _ := meta.UnsafeGuessKindToResource(gvk)
			key := plural.Group + "/" + plural.Resource
			if seen[key] {
				continue
			}
			seen[key] = true
			want := auditv1.LevelRequestResponse
			if plural.Group == "" && plural.Resource == "secrets" {
				want = auditv1.LevelMetadata
			}
			for _, verb := range []string{"create", "update", "patch", "delete"} {
				assert.Equal(t, want, levelFor(&policy, verb, plural.Group, plural.Resource), "%s %s (%s in %s)", verb, key, gvk.Kind, env)
			}
			if !strings.HasSuffix(plural.Resource, "/status") {
				assert.Equal(t, auditv1.LevelNone, levelFor(&policy, "get", plural.Group, plural.Resource), "reads of %s are not logged", key)
			}
		}
	}
	assert.Contains(t, seen, "cert-manager.io/certificates", "the envs render a Certificate")
}
