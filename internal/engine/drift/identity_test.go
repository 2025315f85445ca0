package drift_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// eventsOf answers every write with one actor (a unit test's stand-in for the audit events).
type eventsOf drift.Actor

func (e eventsOf) WriterOf(*unstructured.Unstructured, *drift.Field) *drift.Actor {
	a := drift.Actor(e)
	return &a
}
func (e eventsOf) CreatorOf(*unstructured.Unstructured) *drift.Actor { return nil }

// TestWhoMayWriteUnderAControllersName: with audit events, the HPA rule excuses a scale write by
// kube-controller-manager's identity and not a person's under its name; a user's rule for the
// same manager adds identities (KEDA installed in its own namespace under another account).
func TestWhoMayWriteUnderAControllersName(t *testing.T) {
	git := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: ns1}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: api}}\n  template:\n    metadata: {labels: {app: api}}\n    spec:\n      containers: [{name: api, image: api:1}]\n"
	live := func(manager string) *unstructured.Unstructured {
		l := parse(t, git)
		l.Object["spec"].(map[string]any)["replicas"] = int64(7)
		l.SetResourceVersion("9")
		l.SetManagedFields([]metav1.ManagedFieldsEntry{
			mf("argocd-controller", "Apply", "", `{"f:spec":{"f:selector":{},"f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"api\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`),
			mf(manager, "Update", "scale", `{"f:spec":{"f:replicas":{}}}`),
		})
		return l
	}
	for _, tc := range []struct {
		name, manager, user string
		rules               []drift.ControllerRule
		borrowed            bool
	}{
		{name: "the HPA itself", manager: "kube-controller-manager", user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler"},
		{name: "a person under its name", manager: "kube-controller-manager", user: "alice", borrowed: true},
		{name: "a person acting as it", manager: "kube-controller-manager", user: "system:kube-controller-manager", borrowed: true},
		{name: "KEDA under an account the defaults do not know", manager: "keda-operator", user: "system:serviceaccount:autoscaling:keda", borrowed: true},
		{name: "the same, named by a user's rule", manager: "keda-operator", user: "system:serviceaccount:autoscaling:keda",
			rules: []drift.ControllerRule{{Manager: "keda-operator", Subresource: "scale", Paths: []string{"/spec/replicas"}, Users: []string{"system:serviceaccount:autoscaling:keda"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := drift.DefaultOptions()
			opts.Schema = builtins
			opts.Controllers = append(append([]drift.ControllerRule{}, drift.DefaultControllers...), tc.rules...)
			opts.Autoscaled = func(schema.GroupKind, string, string) bool { return true }
			actor := drift.Actor{User: tc.user}
			if tc.name == "a person acting as it" {
				actor = drift.Actor{User: "alice", ImpersonatedUser: tc.user}
			}
			// The event came in only after the comparison, which then had every field of the
			// object (Argo CD's verdict shown field by field): attribution names the same borrower.
			late := opts
			late.Controllers = nil
			lo := drift.CompareObject(parse(t, git), live(tc.manager), nil, &late)
			require.NotNil(t, lo)
			require.Len(t, lo.Fields, 1)
			lo.Fields[0].Actor = &actor
			want := ""
			if tc.borrowed {
				want = tc.manager
			}
			assert.Equal(t, want, opts.BorrowedName(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "ns1", "api", &lo.Fields[0]), "named after the fact")

			opts.Events = eventsOf(actor)
			o := drift.CompareObject(parse(t, git), live(tc.manager), nil, &opts)
			if !tc.borrowed {
				assert.Nil(t, o)
				return
			}
			if assert.NotNil(t, o) && assert.Len(t, o.Fields, 1) {
				assert.Equal(t, tc.manager, o.Fields[0].Borrowed)
			}
		})
	}
}

// TestReplicasNobodyOwns: replicas Git leaves to the default, set to 4 by a scale write that
// recorded no owner, are drift, unless an autoscaler targets the object or a rule names
// replicas for a controller that scales it (cluster-proportional-autoscaler).
func TestReplicasNobodyOwns(t *testing.T) {
	git := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: dns, namespace: ns1}\nspec:\n  selector: {matchLabels: {app: dns}}\n  template:\n    metadata: {labels: {app: dns}}\n    spec:\n      containers: [{name: dns, image: dns:1}]\n"
	l := parse(t, git)
	l.Object["spec"].(map[string]any)["replicas"] = int64(4)
	l.SetResourceVersion("3")
	l.SetManagedFields([]metav1.ManagedFieldsEntry{mf("argocd-controller", "Apply", "", `{"f:spec":{"f:selector":{},"f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"dns\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`)})
	opts := drift.DefaultOptions()
	opts.Schema = builtins
	opts.Defaults = argocd.Defaults
	opts.Autoscaled = func(schema.GroupKind, string, string) bool { return false }
	o := drift.CompareObject(parse(t, git), l, nil, &opts)
	if assert.NotNil(t, o) && assert.Len(t, o.Fields, 1) {
		assert.Equal(t, []any{".spec.replicas", drift.Changed, int64(4)}, []any{o.Fields[0].Path, o.Fields[0].Change, o.Fields[0].Live})
	}
	opts.Controllers = append(opts.Controllers, drift.ControllerRule{Manager: "cluster-proportional-autoscaler", Subresource: "scale", Group: "apps", Kinds: []string{"Deployment"}, Paths: []string{"/spec/replicas"}})
	assert.Nil(t, drift.CompareObject(parse(t, git), l, nil, &opts), "a rule names replicas")
	opts.Controllers = drift.DefaultControllers
	opts.Autoscaled = func(schema.GroupKind, string, string) bool { return true }
	assert.Nil(t, drift.CompareObject(parse(t, git), l, nil, &opts), "an autoscaler targets it")
}
