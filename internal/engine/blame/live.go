package blame

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// Cluster is what AddLive reads of the cluster (the live cache, live.Cache).
type Cluster interface {
	// Mapping gives a kind's resource (the audit events name resources, not kinds).
	Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error)
	// Get returns the live object, false when the cluster does not have it.
	Get(gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, bool)
}

// AddLive adds what the cluster says: the object's drift in rep (the env's audit, nil when none
// is at hand) on the fields it concerns, and the writes people holds for the live object (nil: no
// audit events). c may be nil when the cluster was not reached.
func (b *Blame) AddLive(c Cluster, people *auditlog.Store, rep *drift.Report) {
	b.Live = &Live{AuditEvents: people != nil}
	gvk := schema.FromAPIVersionAndKind(b.Object.APIVersion, b.Object.Kind)
	var uid string
	if c != nil {
		if u, ok := c.Get(gvk, b.Object.Namespace, b.Object.Name); ok {
			b.Live.Found, b.Live.UID, b.Live.ResourceVersion = true, string(u.GetUID()), u.GetResourceVersion()
			uid = b.Live.UID
		}
	}
	if rep != nil {
		b.addDrift(rep)
	}
	if people == nil {
		return
	}
	if c == nil {
		b.Notes = append(b.Notes, "no cluster: the writes of the audit events cannot be looked up without the kind's resource")
		return
	}
	m, err := c.Mapping(gvk)
	if err != nil {
		b.Notes = append(b.Notes, fmt.Sprintf("writes not looked up: %v", err))
		return
	}
	ws := people.Writes(auditlog.Object{Cluster: b.Cluster, Group: gvk.Group, Resource: m.Resource.Resource, Namespace: b.Object.Namespace, Name: b.Object.Name}, uid)
	if len(ws) > DefaultMaxWrites {
		b.Notes = append(b.Notes, fmt.Sprintf("%d older writes left out", len(ws)-DefaultMaxWrites))
		ws = ws[:DefaultMaxWrites]
	}
	for _, w := range ws {
		a := people.ThroughArgoCD(&w.Actor, gvk.GroupKind(), b.Object.Namespace, b.Object.Name) // argocd-server's write: its user
		out := Write{User: a.User, ImpersonatedUser: a.ImpersonatedUser, Groups: a.Groups, Tool: w.Manager,
			Subresource: w.Subresource, Verb: a.Verb, Time: a.Time, UserAgent: a.UserAgent, AuditID: a.AuditID,
			ResourceVersion: w.ResourceVersion, ChangesFrom: w.ChangesFrom, ChangesTruncated: w.ChangesTruncated, Changes: []Change{}, From: a.From, Via: a.Via}
		for _, ch := range w.Changes {
			out.Changes = append(out.Changes, Change{Path: ch.Path, Old: ch.From, New: ch.To, Change: ch.Change})
		}
		b.Writes = append(b.Writes, out)
	}
}

// addDrift puts the object's drifted fields on the fields they concern; a drifted field Git does
// not declare (added by hand) is a field of its own.
func (b *Blame) addDrift(rep *drift.Report) {
	audited := rep.Revision
	for _, a := range rep.Applications {
		if b.Application != "" && a.Name == b.Application && a.Revision != "" {
			audited = a.Revision // the Application's own synced revision
		}
	}
	b.Live.AuditedRevision = audited
	if audited != b.Revision {
		b.Notes = append(b.Notes, fmt.Sprintf("the drift is from an audit of %.12s, not of %.12s", audited, b.Revision))
	}
	o := b.reported(rep)
	if o == nil {
		b.Live.Status = InSync
		return
	}
	b.Live.Status = o.Status
	if o.Note != "" {
		b.Notes = append(b.Notes, o.Status+": "+o.Note)
	}
	for _, df := range o.Fields {
		p := df.FieldPath.Path()
		attached := false
		for i := range b.Fields {
			leaf := b.Fields[i].FieldPath.Path()
			if b.Fields[i].Commit != nil && (hasPrefix(leaf, p) || hasPrefix(p, leaf)) {
				b.Fields[i].Drift = append(b.Fields[i].Drift, df)
				attached = true
			}
		}
		if !attached {
			b.Fields = append(b.Fields, Field{Path: df.Path, FieldPath: df.FieldPath, Drift: []drift.Field{df}})
		}
	}
}

// reported is the object's entry in the report, nil when it is not there (in sync).
func (b *Blame) reported(rep *drift.Report) *drift.Object {
	group := schema.FromAPIVersionAndKind(b.Object.APIVersion, b.Object.Kind).Group
	for i := range rep.Objects {
		o := &rep.Objects[i]
		if o.Cluster == b.Cluster && o.Kind == b.Object.Kind && o.Name == b.Object.Name && schema.FromAPIVersionAndKind(o.APIVersion, o.Kind).Group == group &&
			(b.Object.Namespace == "" || o.Namespace == b.Object.Namespace) {
			return o
		}
	}
	return nil
}

// Models is where ClusterTypes reads the cluster's schema (live.Cache).
type Models interface {
	OpenAPIModels(ctx context.Context, gvs []schema.GroupVersion) (map[string]*spec.Schema, string, error)
}

// ClusterTypes types kinds from the cluster's OpenAPI v3 (CRDs included), as the audit does; a
// kind it cannot type gets nil (Options.Types then falls back to the schema compiled in).
func ClusterTypes(ctx context.Context, m Models) func(schema.GroupVersionKind) *typed.ParseableType {
	return func(gvk schema.GroupVersionKind) *typed.ParseableType {
		models, _, err := m.OpenAPIModels(ctx, []schema.GroupVersion{gvk.GroupVersion()})
		if err != nil {
			return nil
		}
		s, err := drift.NewSchema(models)
		if err != nil {
			return nil
		}
		return s.Type(gvk)
	}
}
