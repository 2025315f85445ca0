package drift

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// ControllerRule names a controller for some fields of some kinds: what that field manager
// writes there is its job, not drift. Rules come from the env's configuration; nothing else
// excuses a value that differs from Git.
type ControllerRule struct {
	// Manager is the field manager the controller writes as (kube-controller-manager, karpenter).
	Manager string `json:"manager"`
	// Subresource, when set, must match the managedFields entry's (scale for the HPA).
	Subresource string `json:"subresource,omitempty"`
	// Group and Kinds restrict the rule to kinds; empty Kinds means every kind of the group, and
	// an empty Group with empty Kinds every kind.
	Group string   `json:"group,omitempty"`
	Kinds []string `json:"kinds,omitempty"`
	// Paths are JSON pointers (RFC 6901) of the fields, each covering what lies below it.
	Paths []string `json:"paths"`
	// Autoscaled restricts the rule to objects a HorizontalPodAutoscaler in their namespace
	// targets (scaleTargetRef): a scale write under an autoscaler's name to an object no
	// autoscaler scales is drift.
	Autoscaled bool `json:"autoscaled,omitempty"`
	// Users are the identities the controller authenticates as (path.Match patterns such as
	// system:serviceaccount:*:keda-operator). With audit events, the rule excuses only writes
	// made by one of them; empty means the manager's DefaultIdentities, else any Kubernetes
	// identity (system:…).
	Users []string `json:"users,omitempty"`
}

// DefaultControllers are the platform's controllers and the fields they own: the HPA (run by
// kube-controller-manager, also behind KEDA) on replicas through the scale subresource, the
// Deployment controller's revision annotation, Karpenter's drift hashes on its node classes, Argo
// CD's sync and refresh requests on Applications.
var DefaultControllers = []ControllerRule{
	{Manager: "kube-controller-manager", Subresource: "scale", Paths: []string{"/spec/replicas"}, Autoscaled: true},
	{Manager: "keda-operator", Subresource: "scale", Paths: []string{"/spec/replicas"}, Autoscaled: true},
	{Manager: "kube-controller-manager", Group: "apps", Kinds: []string{"Deployment"},
		Paths: []string{"/metadata/annotations/deployment.kubernetes.io~1revision"}},
	// The PV controller binds a claim Git declares to a volume, and the scheduler picks its node.
	{Manager: "kube-controller-manager", Kinds: []string{"PersistentVolumeClaim"}, Paths: []string{"/spec/volumeName",
		"/metadata/annotations/pv.kubernetes.io~1bind-completed", "/metadata/annotations/pv.kubernetes.io~1bound-by-controller",
		"/metadata/annotations/volume.kubernetes.io~1storage-provisioner", "/metadata/annotations/volume.beta.kubernetes.io~1storage-provisioner",
		"/metadata/finalizers"}},
	{Manager: "kube-scheduler", Kinds: []string{"PersistentVolumeClaim"}, Paths: []string{"/metadata/annotations/volume.kubernetes.io~1selected-node"}},
	{Manager: "karpenter", Group: "karpenter.sh", Kinds: []string{"NodePool"},
		Paths: []string{"/metadata/annotations/karpenter.sh~1nodepool-hash", "/metadata/annotations/karpenter.sh~1nodepool-hash-version"}},
	{Manager: "karpenter", Group: "karpenter.k8s.aws", Kinds: []string{"EC2NodeClass"},
		Paths: []string{"/metadata/annotations/karpenter.k8s.aws~1ec2nodeclass-hash", "/metadata/annotations/karpenter.k8s.aws~1ec2nodeclass-hash-version"}},
	// An app-of-apps' Applications: Argo CD puts a sync request in .operation (its controller
	// for an automated sync, its API server for one a person asks for) and a refresh request in
	// an annotation, and takes both away when done. Neither changes what the Application syncs.
	// Its controller also adds the pre- and post-delete hook finalizers; its notifications
	// controller records what it sent.
	{Manager: "argocd-application-controller", Group: "argoproj.io", Kinds: []string{"Application"},
		Paths: append([]string{"/operation", "/metadata/finalizers"}, argoRequestAnnotations...)},
	{Manager: "argocd-server", Group: "argoproj.io", Kinds: []string{"Application"},
		Paths: append([]string{"/operation"}, argoRequestAnnotations...)},
	{Manager: "argocd-notifications-controller", Group: "argoproj.io", Kinds: []string{"Application"},
		Paths: []string{"/metadata/annotations/notified.notifications.argoproj.io"}},
}

// argoRequestAnnotations are the requests Argo CD's API server and controller put on an
// Application and take away (argo-cd v3.6.1 applicationset defaultPreservedAnnotations).
var argoRequestAnnotations = []string{"/metadata/annotations/argocd.argoproj.io~1refresh",
	"/metadata/annotations/argocd.argoproj.io~1refresh-timestamp", "/metadata/annotations/argocd.argoproj.io~1hydrate",
	"/metadata/annotations/argocd.argoproj.io~1hydrate-timestamp"}

func (r ControllerRule) matches(gk schema.GroupKind, o *owner, p fieldpath.Path) bool {
	if o.Manager != r.Manager || r.Subresource != "" && o.Subresource != r.Subresource || !r.appliesTo(gk) {
		return false
	}
	return len(r.Paths) == 0 || r.covers(p)
}

// appliesTo says whether the rule is for kinds of gk.
func (r ControllerRule) appliesTo(gk schema.GroupKind) bool {
	if r.Group != gk.Group && (r.Group != "" || len(r.Kinds) > 0) {
		return false
	}
	return len(r.Kinds) == 0 || slices.Contains(r.Kinds, gk.Kind)
}

// covers says whether one of the rule's paths is p or one of its ancestors.
func (r ControllerRule) covers(p fieldpath.Path) bool {
	for _, ptr := range r.Paths {
		if pointerCovers(ptr, p) {
			return true
		}
	}
	return false
}
