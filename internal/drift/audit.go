// Package drift compares what Git says (rendered objects) with what runs (live objects), field by
// field, and says who changed each drifted field, from managedFields. It needs no dry-run: after a
// server-side sync, a field someone set to another value changes owner away from the GitOps
// applier, a field someone added is owned by that someone, and defaults are owned by nobody.
package drift

import (
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// LiveReader is the live state the audit reads: the live package's informer cache implements it.
type LiveReader interface {
	// Get returns the live object, or false when there is none.
	Get(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool)
	// List returns the live objects of a kind in a namespace ("" for cluster-scoped).
	List(gvk schema.GroupVersionKind, namespace string) []*unstructured.Unstructured
}

// IgnoreRule is an Argo CD ignoreDifferences entry: fields not to compare on matching objects.
type IgnoreRule struct {
	Group, Kind, Namespace, Name string
	JSONPointers                 []string
	ManagedFieldsManagers        []string
}

// Options tune an audit.
type Options struct {
	// Applier is the GitOps field manager (Argo CD's server-side sync: argocd-controller).
	Applier string
	// AllowedManagers own fields legitimately: controllers such as the HPA (kube-controller-manager)
	// or KEDA. What they write is never drift.
	AllowedManagers []string
	// Ignore are the Application's ignoreDifferences.
	Ignore []IgnoreRule
	// ExtraKinds are the kinds people write by hand, searched for objects not in Git.
	ExtraKinds []schema.GroupVersionKind
	// Now is the clock (tests).
	Now func() time.Time
}

// DefaultOptions returns the options for an Argo CD server-side sync.
func DefaultOptions() Options {
	return Options{
		Applier:         "argocd-controller",
		AllowedManagers: []string{"kube-controller-manager", "kube-scheduler", "keda-operator", "keda", "cloudnative-pg", "argocd-application-controller"},
		ExtraKinds:      DefaultExtraKinds,
		Now:             time.Now,
	}
}

// DefaultExtraKinds are the kinds people create by hand: workloads, Services, ConfigMaps, Secrets,
// routes, autoscalers, PDBs, RBAC, NetworkPolicies.
var DefaultExtraKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"}, {Group: "batch", Version: "v1", Kind: "CronJob"},
	{Group: "batch", Version: "v1", Kind: "Job"}, {Version: "v1", Kind: "Service"}, {Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "ServiceAccount"}, {Version: "v1", Kind: "PersistentVolumeClaim"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}, {Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}, {Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, {Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"},
	{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}, {Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"},
}

// Audit compares every desired object with its live counterpart and searches the managed
// namespaces for objects made by hand. Objects come back sorted by kind, namespace and name.
func Audit(desired []*unstructured.Unstructured, live LiveReader, opts Options) []Object {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var out []Object
	for _, d := range desired {
		gvk := d.GroupVersionKind()
		l, ok := live.Get(gvk, d.GetNamespace(), d.GetName())
		if !ok {
			out = append(out, Object{APIVersion: d.GetAPIVersion(), Kind: d.GetKind(), Namespace: d.GetNamespace(), Name: d.GetName(), Status: Missing, Fields: []Field{}})
			continue
		}
		if fields := compare(d, l, opts); len(fields) > 0 {
			out = append(out, Object{APIVersion: d.GetAPIVersion(), Kind: d.GetKind(), Namespace: d.GetNamespace(), Name: d.GetName(), Status: Modified, Fields: fields})
		}
	}
	out = append(out, extras(desired, live, opts)...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}

// compare returns the drifted fields of one object.
func compare(desiredObj, liveObj *unstructured.Unstructured, opts Options) []Field {
	d := desiredObj.Object
	isSecret := desiredObj.GetKind() == "Secret" && desiredObj.GroupVersionKind().Group == ""
	if isSecret {
		d = runtime.DeepCopyJSON(d)
		secretData(d)
	}
	rules := matchingRules(opts.Ignore, desiredObj)
	ignoredManagers := map[string]bool{}
	for _, r := range rules {
		for _, m := range r.ManagedFieldsManagers {
			ignoredManagers[m] = true
		}
	}
	allowed := func(m string) bool {
		return m == opts.Applier || ignoredManagers[m] || slices.Contains(opts.AllowedManagers, m)
	}
	os := owners(liveObj.GetManagedFields())
	var fields []Field
	seen := map[string]bool{}
	for _, rd := range compareObject(d, liveObj.Object) {
		if ignored(rules, rd.path) {
			continue
		}
		w := ownerOf(os, rd.path)
		if w != nil && allowed(w.Manager) {
			// The applier owning a differing field means the API server normalised it, or Git moved
			// on (pending sync); an allowed controller owning it is its job. Neither is drift.
			continue
		}
		seen[rd.path.String()] = true
		fields = append(fields, newField(rd, w))
	}
	// Fields a non-allowed manager set that Git does not declare at all.
	for _, o := range os {
		if allowed(o.Manager) {
			continue
		}
		o.decode()
		for _, leaf := range o.leaves {
			if !countsForAdded(leaf) {
				continue
			}
			p, ok := firstUndeclared(d, leaf)
			if !ok || seen[p.String()] || ignored(rules, p) {
				continue
			}
			v, ok := lookup(liveObj.Object, p)
			if !ok {
				continue
			}
			seen[p.String()] = true
			fields = append(fields, newField(rawDiff{path: p, live: v, change: Added}, o))
		}
	}
	sort.SliceStable(fields, func(i, j int) bool { return fields[i].Path < fields[j].Path })
	if isSecret {
		for i := range fields {
			if strings.HasPrefix(fields[i].Path, ".data") || strings.HasPrefix(fields[i].Path, ".stringData") {
				fields[i].Desired, fields[i].Live = maskValue(fields[i].Desired), maskValue(fields[i].Live)
			}
		}
	}
	return fields
}

// maskValue masks a Secret field: a single value or a whole data map.
func maskValue(v any) any {
	if m, ok := v.(map[string]any); ok {
		out := make(map[string]any, len(m))
		for k, x := range m {
			out[k] = maskSecret(x)
		}
		return out
	}
	return maskSecret(v)
}

func newField(rd rawDiff, w *owner) Field {
	f := Field{Path: rd.path.String(), Desired: rd.desired, Live: rd.live, Change: rd.change}
	if w != nil {
		f.Writer = Writer{Manager: w.Manager, Operation: w.Operation, Subresource: w.Subresource}
		if !w.Time.IsZero() {
			f.Time = w.Time.Format(time.RFC3339)
		}
	}
	return f
}

// countsForAdded keeps spec-like fields, labels and annotations; not status or bookkeeping.
func countsForAdded(p path) bool {
	if len(p) == 0 || p[0].kind != fieldElem {
		return false
	}
	switch p[0].field {
	case "status", "apiVersion", "kind":
		return false
	case "metadata":
		if len(p) < 3 || p[1].kind != fieldElem || (p[1].field != "labels" && p[1].field != "annotations") {
			return false
		}
		return p[2].field != "kubectl.kubernetes.io/last-applied-configuration"
	}
	return true
}

// firstUndeclared returns the shortest prefix of p that desired does not declare.
func firstUndeclared(desired map[string]any, p path) (path, bool) {
	for i := 1; i <= len(p); i++ {
		if _, ok := lookup(desired, p[:i]); !ok {
			return p[:i], true
		}
	}
	return nil, false
}

func matchingRules(rules []IgnoreRule, o *unstructured.Unstructured) []IgnoreRule {
	var out []IgnoreRule
	gvk := o.GroupVersionKind()
	for _, r := range rules {
		if r.Kind != "" && r.Kind != gvk.Kind || r.Group != gvk.Group && !(r.Group == "" && gvk.Group == "") {
			continue
		}
		if r.Name != "" && r.Name != o.GetName() || r.Namespace != "" && r.Namespace != o.GetNamespace() {
			continue
		}
		out = append(out, r)
	}
	return out
}

// ignored reports whether a jsonPointer of a matching rule covers p.
func ignored(rules []IgnoreRule, p path) bool {
	ptr, _ := p.JSONPointer()
	for _, r := range rules {
		for _, jp := range r.JSONPointers {
			if ptr == jp || strings.HasPrefix(ptr, strings.TrimSuffix(jp, "/")+"/") {
				return true
			}
		}
	}
	return false
}
