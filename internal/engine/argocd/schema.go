package argocd

import (
	"strings"

	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/utils/kube/scheme"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// StaticSchema types the built-in kinds among gvks without a cluster, from the schema of the
// Kubernetes API that Argo CD's gitops-engine compiles in (the same one client-go's apply
// configurations use). Kinds it does not know (CRDs) are left to deduced types.
func StaticSchema(gvks []schema.GroupVersionKind) *drift.Schema {
	parser := scheme.StaticParser()
	types := map[schema.GroupVersionKind]*typed.ParseableType{}
	for _, gvk := range gvks {
		group := gvk.Group
		switch {
		case group == "":
			group = "core"
		case strings.HasSuffix(group, ".k8s.io"):
			group = strings.SplitN(group, ".", 2)[0]
		case strings.Contains(group, "."):
			continue // not a built-in API group
		}
		pt := parser.Type("io.k8s.api." + group + "." + gvk.Version + "." + gvk.Kind)
		if pt.IsValid() {
			types[gvk] = &pt
		}
	}
	return drift.SchemaOf(types)
}
