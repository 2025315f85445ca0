// Package drift compares what Git says (rendered objects) with what runs (live objects), field by
// field, by value, on typed values built from the API server's schema — list keys, quantities and
// int-or-string the way the API server sees them — and says who changed each drifted field from
// managedFields at that exact path. A field Git declares that holds another value live is drift
// whoever wrote it; only the Application's ignoreDifferences and controllers named for a field in
// the configuration make it not drift.
package drift

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// LiveReader is the live state the audit reads: the live package's informer cache implements it.
type LiveReader interface {
	// Get returns the live object, or false when there is none.
	Get(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool)
	// List returns the live objects of a kind in a namespace ("" for cluster-scoped).
	List(gvk schema.GroupVersionKind, namespace string) []*unstructured.Unstructured
}

// VersionHistory is what a watching LiveReader may also offer: the versions of an object it saw,
// newest (the current one) first. It names who removed a field, which managedFields cannot.
type VersionHistory interface {
	Versions(gvk schema.GroupVersionKind, namespace, name string) []*unstructured.Unstructured
}

// Normalizer removes from both sides what the env's Argo CD Application says to ignore
// (ignoreDifferences: jsonPointers, jqPathExpressions, managedFieldsManagers, and argocd-cm's
// resource customizations), with Argo CD's own normalizers. Nil objects come back nil.
type Normalizer interface {
	Normalize(desired, live *unstructured.Unstructured, pt *typed.ParseableType) (*unstructured.Unstructured, *unstructured.Unstructured, error)
}

// Options tune an audit.
type Options struct {
	// Applier is the GitOps field manager (Argo CD's server-side sync: argocd-controller). Its
	// name never excuses a value; it only says which writes are the sync's own.
	Applier string
	// Controllers name the fields controllers own (the HPA on replicas); see ControllerRule.
	Controllers []ControllerRule
	// Creators are the controllers that create objects of their own in managed namespaces
	// (PVCs of StatefulSets, CloudNativePG's Services): what they make is not Extra. The applier
	// is not one: what it made that Git does not declare is an object Argo CD would prune.
	Creators []string
	// Identities are the users each field manager's controller authenticates as (nil:
	// DefaultIdentities); with Events, a controller's name counts only for writes they made.
	Identities map[string][]string
	// Events, when set, names who made each write from the API server's audit events.
	Events Events
	// Excused, when set, tallies the fields controller rules excuse.
	Excused *Excusals
	// Cluster names the cluster the live objects are on ("" for Argo CD's own): objects of two
	// clusters are tallied apart in Excused.
	Cluster string
	// Application is the audited Application as Argo CD's tracking ids name it (namespace_name
	// outside Argo CD's namespace): an undeclared object whose tracking id names another
	// Application is that one's, not Extra.
	Application string
	// Schema types each kind; kinds it lacks are compared with deduced types.
	Schema *Schema
	// Normalizer applies the Application's ignoreDifferences; nil ignores nothing.
	Normalizer Normalizer
	// Autoscaled says whether an autoscaler targets the object (for ControllerRule.Autoscaled);
	// Audit answers it from the live HorizontalPodAutoscalers when nil.
	Autoscaled func(gk schema.GroupKind, namespace, name string) bool
	// Builtin says whether Defaults knows the kind (built-in kinds). For other kinds, keys inside
	// an atomic value the applier's apply wrote whole are taken for server-side additions.
	Builtin func(gvk schema.GroupVersionKind) bool
	// Defaults, when set, fills in Git's object what the API server's defaulting would on a
	// write (built-in kinds), so a value the server set is not taken for a writer's addition.
	Defaults func(desired *unstructured.Unstructured) *unstructured.Unstructured
	// ExtraKinds are the kinds people write by hand, searched for objects not in Git: in the
	// namespaces the env manages and, for cluster-scoped kinds, cluster-wide.
	ExtraKinds []schema.GroupVersionKind
	// ExtraRendered searches every kind the env renders too; ExtraExcept are kinds never
	// searched; ExtraIgnore label selectors of objects that are never Extra.
	ExtraRendered bool
	ExtraExcept   []schema.GroupKind
	ExtraIgnore   []string
	// ExtraOwn are the auditor's own objects, by name (its install's RoleBindings in the
	// namespaces it reads): never Extra, wherever they are.
	ExtraOwn map[Ref]bool
	// ExtraOnlyIn narrows the search in some namespaces to some kinds: in Argo CD's namespace,
	// where an app-of-apps puts Applications, only Argo CD's kinds are the env's (the rest there
	// is Argo CD's install, its Secrets among it).
	ExtraOnlyIn map[string][]schema.GroupKind
	// DeclaredElsewhere says whether another Application of the env declares an object: it is
	// that one's, never Extra here.
	DeclaredElsewhere func(Ref) bool
	// Hooks are the objects Git declares as resource hooks (argocd.argoproj.io/hook or
	// helm.sh/hook): Argo CD runs them around a sync and leaves them out of its comparison, so
	// one found live is not Extra.
	Hooks map[Ref]bool
	// SecretKey keys the HMAC that stands for Secret values in reports (empty: "(redacted)").
	SecretKey []byte
	// IgnoreOwnership compares values only: a live side without managedFields (Argo CD's
	// normalised objects) is not reported as cleared.
	IgnoreOwnership bool
	// Now is the clock (tests).
	Now func() time.Time
}

// DefaultOptions returns the options for an Argo CD server-side sync.
func DefaultOptions() Options {
	return Options{
		Applier:       "argocd-controller",
		Controllers:   DefaultControllers,
		Creators:      DefaultCreators,
		ExtraKinds:    DefaultExtraKinds,
		ExtraRendered: true,
		ExtraExcept:   DefaultExtraExcept,
		ExtraIgnore:   DefaultExtraIgnore,
		Now:           time.Now,
	}
}

// DefaultCreators are the platform's controllers that create objects.
// cert-manager's issuing controller makes each Certificate's Secret without an owner reference;
// External Secrets makes one with creationPolicy Orphan; istiod puts its root certificate in
// every namespace.
var DefaultCreators = []string{"kube-controller-manager", "kube-scheduler", "keda-operator", "cloudnative-pg", "manager", "argocd-application-controller",
	"cert-manager-certificates-issuing", "external-secrets", "pilot-discovery"}

// DefaultExtraKinds are the kinds people create by hand, or that grant access or move data:
// workloads, Services, ConfigMaps, Secrets and ExternalSecrets, routes, autoscalers, PDBs, RBAC
// (cluster-wide too), NetworkPolicies, Certificates, Prometheus monitors and rules.
var DefaultExtraKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"}, {Group: "batch", Version: "v1", Kind: "CronJob"},
	{Group: "batch", Version: "v1", Kind: "Job"}, {Version: "v1", Kind: "Service"}, {Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "ServiceAccount"}, {Version: "v1", Kind: "PersistentVolumeClaim"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}, {Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}, {Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, {Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"},
	{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}, {Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, {Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
	{Group: "external-secrets.io", Version: "v1", Kind: "ExternalSecret"}, {Group: "cert-manager.io", Version: "v1", Kind: "Certificate"},
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}, {Group: "monitoring.coreos.com", Version: "v1", Kind: "PodMonitor"},
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"},
}

// Audit compares every desired object with its live counterpart and searches the managed
// namespaces for objects made by hand. Objects come back sorted by kind, namespace and name.
func Audit(desired []*unstructured.Unstructured, live LiveReader, opts Options) []Object {
	return AuditIndex(NewIndex(desired), live, opts)
}

// AuditIndex is Audit of the objects an Index holds: from a compact index (IndexBuilder), each
// one is decoded only while it is compared.
func AuditIndex(idx *Index, live LiveReader, opts Options) []Object {
	history := prepare(live, &opts)
	var out []Object
	for _, r := range idx.Refs() {
		d, ok := idx.Desired(r)
		if !ok { // cannot happen: the index encoded it; said rather than passed as in sync
			out = append(out, Object{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Status: Unknown, Fields: []Field{},
				Note: "the auditor could not decode Git's object from its index"})
			continue
		}
		if o := auditOne(d, live, history, &opts); o != nil {
			out = append(out, *o)
		}
	}
	for _, d := range idx.shadowed {
		if o := auditOne(d, live, history, &opts); o != nil {
			out = append(out, *o)
		}
	}
	out = append(out, idx.extras(live, opts)...)
	SortObjects(out)
	return out
}

// prepare fills opts' defaults that depend on live, and returns the earlier versions live keeps
// (nil when it keeps none).
func prepare(live LiveReader, opts *Options) VersionHistory {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Autoscaled == nil {
		opts.Autoscaled = AutoscaledIn(live)
	}
	history, _ := live.(VersionHistory)
	return history
}

// auditOne compares one desired object with its live counterpart: Missing, Modified, or nil.
func auditOne(d *unstructured.Unstructured, live LiveReader, history VersionHistory, opts *Options) *Object {
	gvk := d.GroupVersionKind()
	l, ok := live.Get(gvk, d.GetNamespace(), d.GetName())
	if !ok {
		return &Object{APIVersion: d.GetAPIVersion(), Kind: d.GetKind(), Namespace: d.GetNamespace(), Name: d.GetName(), Status: Missing, Fields: []Field{}}
	}
	var versions []*unstructured.Unstructured
	if history != nil {
		versions = history.Versions(gvk, d.GetNamespace(), d.GetName())
	}
	return CompareObject(d, l, versions, opts)
}

// SortObjects orders objects by kind, namespace and name.
func SortObjects(out []Object) {
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
}

// ownersUnder returns the entries owning something inside p (an added map or list item).
func ownersUnder(os []*owner, p fieldpath.Path) []*owner {
	var out []*owner
	for _, o := range os {
		if hasUnder(o.fields(), p) {
			out = append(out, o)
		}
	}
	return out
}

// hasUnder reports whether s holds p or anything below it.
func hasUnder(s *fieldpath.Set, p fieldpath.Path) bool {
	cur := s
	for i, pe := range p {
		if i == len(p)-1 && cur.Members.Has(pe) {
			return true
		}
		child, ok := cur.Children.Get(pe)
		if !ok {
			return false
		}
		cur = child
	}
	return !cur.Empty()
}

func newField(rd rawDiff) Field {
	return Field{Path: Display(rd.path), FieldPath: FieldPath(rd.path), Desired: rd.desired, Live: rd.live, Change: rd.change,
		Actor: rd.borrowed, Borrowed: rd.borrowedName}
}

// lastApplied is the annotation a client-side kubectl apply keeps the whole object in: a
// Secret's data in clear.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// withoutLastApplied returns v (a Secret field's value) with the last-applied annotation's value
// redacted wherever a map holds it.
func withoutLastApplied(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, c := range m {
		if k == lastApplied {
			out[k] = "(redacted)"
			continue
		}
		out[k] = withoutLastApplied(c)
	}
	return out
}
