package drift_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// mapLive is a LiveReader over a fixed set of objects.
type mapLive []*unstructured.Unstructured

func (m mapLive) Get(gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, bool) {
	for _, u := range m {
		if u.GroupVersionKind().GroupKind() == gvk.GroupKind() && u.GetNamespace() == ns && u.GetName() == name {
			return u.DeepCopy(), true
		}
	}
	return nil, false
}

func (m mapLive) List(gvk schema.GroupVersionKind, ns string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range m {
		if u.GroupVersionKind().GroupKind() == gvk.GroupKind() && u.GetNamespace() == ns {
			out = append(out, u.DeepCopy())
		}
	}
	return out
}

// TestAuditOfACompactIndex checks the daemon's full audit (a compact index, each object decoded
// only while it is compared; IndexBuilder): the edited field, the deleted object, the one made by hand, and a
// Ref Git declares twice — the copy that differs from the cluster is reported though the index
// answers for the Ref with the last copy (as Argo CD does). An index of the decoded objects
// (what `auditor diff` compares) reports the same.
func TestAuditOfACompactIndex(t *testing.T) {
	desired := func() []*unstructured.Unstructured {
		return []*unstructured.Unstructured{
			parse(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: rag}\n"),
			parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: qdrant, namespace: rag}\ndata: {replicas: \"3\"}\n"),
			parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gone, namespace: rag}\ndata: {a: b}\n"),
			parse(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: api}\nspec: {replicas: 2}\n"),
			parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: twice, namespace: rag}\ndata: {k: first}\n"),
			parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: twice, namespace: rag}\ndata: {k: second}\n"),
		}
	}
	edited := parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: qdrant, namespace: rag}\ndata: {replicas: \"5\"}\n")
	edited.SetManagedFields([]metav1.ManagedFieldsEntry{mf("kubectl-edit", "Update", "", `{"f:data":{"f:replicas":{}}}`)})
	byHand := parse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: debug, namespace: rag}\ndata: {x: y}\n")
	byHand.SetManagedFields([]metav1.ManagedFieldsEntry{mf("kubectl-create", "Update", "", `{"f:data":{"f:x":{}}}`)})
	live := mapLive{desired()[0], edited, desired()[3], byHand, desired()[5]}
	opts := drift.DefaultOptions()
	opts.Schema = builtins

	// Half the objects come as the JSON they were read as (a render from the cache), half
	// decoded (one scope rewrote, or a fresh render).
	b := drift.NewIndexBuilder(6)
	for i, d := range desired() {
		var raw json.RawMessage
		if i%2 == 0 {
			var err error
			raw, err = d.MarshalJSON()
			require.NoError(t, err)
		}
		b.Add(d, raw)
	}
	idx := b.Index()
	got := drift.AuditIndex(idx, live, opts)
	type verdict struct{ Kind, Name, Status, Fields string }
	var verdicts []verdict
	for _, o := range got {
		var fields []string
		for _, f := range o.Fields {
			fields = append(fields, fmt.Sprintf("%s: %v → %v", f.Path, f.Desired, f.Live))
		}
		verdicts = append(verdicts, verdict{o.Kind, o.Name, string(o.Status), strings.Join(fields, "; ")})
	}
	assert.Equal(t, []verdict{
		{"ConfigMap", "debug", "Extra", ""},
		{"ConfigMap", "gone", "Missing", ""},
		{"ConfigMap", "qdrant", "Modified", ".data.replicas: 3 → 5"},
		{"ConfigMap", "twice", "Modified", ".data.k: first → second"},
	}, verdicts)
	assert.Empty(t, cmp.Diff(got, drift.AuditIndex(drift.NewIndex(desired()), live, opts)), "a compact index audits as the decoded one")

	assert.Equal(t, []drift.Ref{
		{Kind: "ConfigMap", Namespace: "rag", Name: "gone"}, {Kind: "ConfigMap", Namespace: "rag", Name: "qdrant"},
		{Kind: "ConfigMap", Namespace: "rag", Name: "twice"},
		{Kind: "Namespace", Name: "rag"}, {Group: "apps", Kind: "Deployment", Namespace: "api", Name: "api"},
	}, idx.Refs())
	d, ok := idx.Desired(drift.Ref{Kind: "ConfigMap", Namespace: "rag", Name: "twice"})
	require.True(t, ok)
	assert.Equal(t, map[string]any{"k": "second"}, d.Object["data"], "the last copy answers for its Ref")
}

// TestExtraClaimsAnObjectMakes: what an undeclared object says of itself. A tracking annotation
// counts only as Argo CD writes it (naming the object itself); a label naming the tool that
// manages it counts cluster-wide only: in the env's namespaces what is not in Git is the env's.
func TestExtraClaimsAnObjectMakes(t *testing.T) {
	crb := func(name string, labels, annotations map[string]string) *unstructured.Unstructured {
		u := parse(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: "+name+"}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n")
		u.SetLabels(labels)
		u.SetAnnotations(annotations)
		u.SetManagedFields([]metav1.ManagedFieldsEntry{mf("kubectl-create", "Update", "", `{"f:roleRef":{}}`)})
		return u
	}
	byArgoCD := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		u.SetManagedFields([]metav1.ManagedFieldsEntry{mf("argocd-controller", "Apply", "", `{"f:roleRef":{}}`)})
		return u
	}
	secret := parse(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: helm-made, namespace: rag, labels: {app.kubernetes.io/managed-by: Helm}}\n")
	secret.SetManagedFields([]metav1.ManagedFieldsEntry{mf("helm", "Update", "", `{"f:metadata":{"f:labels":{"f:app.kubernetes.io/managed-by":{}}}}`)})
	live := mapLive{
		crb("copied-annotation", nil, map[string]string{"argocd.argoproj.io/tracking-id": "x"}),
		crb("other-app", nil, map[string]string{"argocd.argoproj.io/tracking-id": "llm-policies:rbac.authorization.k8s.io/ClusterRoleBinding:/other-app"}),
		crb("orphan", nil, map[string]string{"argocd.argoproj.io/tracking-id": "llm-prod:rbac.authorization.k8s.io/ClusterRoleBinding:/orphan"}),
		crb("helm-release", map[string]string{"app.kubernetes.io/managed-by": "Helm"}, nil),
		crb("bootstrap", map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}, nil),
		crb("plain", nil, nil),
		// resource hooks Argo CD ran and left (a delete policy that keeps them; a hook since
		// removed from Git): Argo CD neither compares nor prunes them
		byArgoCD(crb("pre-sync-hook", nil, map[string]string{"argocd.argoproj.io/hook": "PreSync", "argocd.argoproj.io/tracking-id": "llm-prod:rbac.authorization.k8s.io/ClusterRoleBinding:/pre-sync-hook"})),
		byArgoCD(crb("helm-hook", nil, map[string]string{"helm.sh/hook": "pre-install", "argocd.argoproj.io/tracking-id": "llm-prod:rbac.authorization.k8s.io/ClusterRoleBinding:/helm-hook"})),
		// made by hand with the two annotations: a claim, whatever it names
		crb("hook-by-hand", nil, map[string]string{"helm.sh/hook": "pre-install", "argocd.argoproj.io/tracking-id": "llm-prod:rbac.authorization.k8s.io/ClusterRoleBinding:/hook-by-hand"}),
		// Argo CD's hook of another Application, which that Application's audit answers for
		byArgoCD(crb("their-hook", nil, map[string]string{"helm.sh/hook": "pre-install", "argocd.argoproj.io/tracking-id": "llm-policies:rbac.authorization.k8s.io/ClusterRoleBinding:/their-hook"})),
		// untracked, the annotation is a claim anyone can make
		crb("claims-to-be-a-hook", nil, map[string]string{"helm.sh/hook": "pre-install"}),
		// "Skip" is not a hook, nor is a CRD helm installs first
		crb("skipped", nil, map[string]string{"argocd.argoproj.io/hook": "Skip"}),
		crb("crd-install", nil, map[string]string{"helm.sh/hook": "crd-install"}),
		secret,
	}
	opts := drift.DefaultOptions()
	opts.Application = "llm-prod"
	var got []string
	for _, o := range drift.Audit([]*unstructured.Unstructured{parse(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: rag}\n")}, live, opts) {
		if o.Status == drift.Extra {
			got = append(got, o.Kind+"/"+o.Namespace+"/"+o.Name)
		}
	}
	assert.Equal(t, []string{"ClusterRoleBinding//claims-to-be-a-hook", "ClusterRoleBinding//copied-annotation", "ClusterRoleBinding//crd-install", "ClusterRoleBinding//hook-by-hand", "ClusterRoleBinding//orphan",
		"ClusterRoleBinding//plain", "ClusterRoleBinding//skipped", "Secret/rag/helm-made"}, got)
}

// TestExtraLeavesTheAuditorsOwnObjects: a RoleBinding the auditor's install made in an env's
// namespace (Options.ExtraOwn, by name) is not Extra; one beside it with the same labels is.
func TestExtraLeavesTheAuditorsOwnObjects(t *testing.T) {
	rb := func(name string) *unstructured.Unstructured {
		u := parse(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: "+name+", namespace: rag, labels: {app.kubernetes.io/name: auditor}}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\n")
		u.SetManagedFields([]metav1.ManagedFieldsEntry{mf("helm", "Update", "", `{"f:roleRef":{}}`)})
		return u
	}
	live := mapLive{rb("auditor-read"), rb("auditor-read-too")}
	opts := drift.DefaultOptions()
	opts.ExtraOwn = map[drift.Ref]bool{{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding", Namespace: "rag", Name: "auditor-read"}: true}
	var got []string
	for _, o := range drift.Audit([]*unstructured.Unstructured{parse(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: rag}\n")}, live, opts) {
		if o.Status == drift.Extra {
			got = append(got, o.Kind+"/"+o.Namespace+"/"+o.Name)
		}
	}
	assert.Equal(t, []string{"RoleBinding/rag/auditor-read-too"}, got)
}
