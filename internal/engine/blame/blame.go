// Package blame is `git blame` for a live object: for every field Git declares for it in an
// environment, the commit that last changed the rendered value (walking the first-parent history
// back, rendering the env at each commit), and beside it what the cluster says — the field's
// drift with the person behind it, and the writes the API server's audit events hold for the
// object, each with the fields it changed. Its JSON form is the documented output of
// `auditor blame -o json` and of the daemon's GET /api/v1/blame.
package blame

import (
	"fmt"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// DefaultMaxCommits bounds the first-parent commits a walk looks at.
const DefaultMaxCommits = 200

// DefaultMaxWrites bounds the writes listed for an object (the newest are kept).
const DefaultMaxWrites = 100

// Blame is the history of one object of an environment.
type Blame struct {
	Env string `json:"env"`
	// Application is the Application of the env that declares the object, when it is not the
	// env's own (overlays/<env>); Path is the path its history was walked in.
	Application string `json:"application,omitempty"`
	Path        string `json:"path"`
	// Revision is the commit the walk started from: the revision Argo CD synced, unless another
	// was asked for, else the branch head.
	Revision string `json:"revision"`
	Object   Object `json:"object"`
	// Cluster is the cluster Live, the drift and Writes are of when it is not Argo CD's own: a
	// cluster of the daemon's clusters config. Set it before AddLive.
	Cluster string `json:"cluster,omitempty"`
	// History says how far the walk went.
	History History `json:"history"`
	// Fields are the leaf fields Git declares for the object at Revision (atomic lists and maps
	// as one field), in path order, then the fields only the live object has that drift.
	Fields []Field `json:"fields"`
	// Live is what the cluster said; nil when it was not asked (Git only).
	Live *Live `json:"live,omitempty"`
	// Writes are the writes to the object the audit events hold, newest first (at most
	// DefaultMaxWrites); empty without audit events.
	Writes []Write `json:"writes"`
	// Notes explain what the result must be read with (commits that did not render, an audit of
	// another revision, writes left out).
	Notes []string `json:"notes,omitempty"`
}

// Object names the blamed object as Git renders it.
type Object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// History is the extent of the walk.
type History struct {
	// Commits is how many first-parent commits were looked at (Revision included); Oldest the
	// last of them.
	Commits int    `json:"commits"`
	Oldest  string `json:"oldest"`
	// Complete is true when the walk reached the commit that added the object to the env (or the
	// repository's first commit): every field's commit is then exact. When false (MaxCommits
	// reached), fields unchanged over the whole walk have a Boundary commit.
	Complete bool `json:"complete"`
	// Skipped are commits where the env did not render; a change across one is given to the
	// newer commit that rendered.
	Skipped []Skipped `json:"skipped,omitempty"`
}

// Skipped is a commit the walk could not render.
type Skipped struct {
	Commit string `json:"commit"`
	Error  string `json:"error"`
}

// Field is one field: its value in Git and the commit that set it, and its drift.
type Field struct {
	// Path like .spec.template.spec.containers[name=vllm].image, as `auditor diff` spells it.
	Path      string          `json:"path"`
	FieldPath drift.FieldPath `json:"fieldPath,omitempty"`
	// Git is the value rendered at Revision (nil for a field only the live object has).
	Git any `json:"git"`
	// Commit is the commit that last changed the rendered value (nil for a live-only field).
	Commit *Commit `json:"commit,omitempty"`
	// Drift lists the drifted fields of the env's audit at this path, under it (the items of an
	// atomic list) or above it (a removed container): the live value, the field manager, and
	// the person from the audit events. Empty when the field is as Git says or was not audited.
	Drift []drift.Field `json:"drift,omitempty"`
}

// Commit is a commit that set a field.
type Commit struct {
	SHA     string    `json:"sha"`
	Author  string    `json:"author"`
	Email   string    `json:"email,omitempty"`
	Date    time.Time `json:"date"`
	Subject string    `json:"subject"`
	// Boundary is set when the value is the same back to the oldest commit walked (MaxCommits
	// reached): this commit or an older one set it.
	Boundary bool `json:"boundary,omitempty"`
}

// Live is what the cluster said about the object.
type Live struct {
	// Found is true when the cluster has the object; UID and ResourceVersion are then its own.
	Found           bool   `json:"found"`
	UID             string `json:"uid,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Status is the object's status in the env's audit: Modified, Missing, Unknown, or InSync;
	// empty when no audit was at hand. AuditedRevision is the revision that audit compared with.
	Status          string `json:"status,omitempty"`
	AuditedRevision string `json:"auditedRevision,omitempty"`
	// AuditEvents is true when the API server's audit events were at hand: Writes and the persons
	// on drifted fields come from them.
	AuditEvents bool `json:"auditEvents"`
}

// InSync is Live.Status of an object the audit found as Git says.
const InSync = "InSync"

// Write is one write to the live object from the API server's audit events.
type Write struct {
	// User is who wrote; ImpersonatedUser whom they acted as (kubectl --as).
	User             string   `json:"user"`
	ImpersonatedUser string   `json:"impersonatedUser,omitempty"`
	Groups           []string `json:"groups,omitempty"`
	// Tool is the field manager the write was made under (kubectl-edit, argocd-controller);
	// Subresource the subresource written (scale).
	Tool        string `json:"tool"`
	Subresource string `json:"subresource,omitempty"`
	Verb        string `json:"verb"`
	// Time is when the API server completed the write (RFC 3339).
	Time            string `json:"time"`
	UserAgent       string `json:"userAgent,omitempty"`
	AuditID         string `json:"auditID,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Changes are the fields the write changed; ChangesFrom says how they are known: "responses"
	// (its response compared with the previous write's; for a patch, the fields its body names),
	// "request" (what the first write seen sent: old values unknown), "created" (the write made
	// the object: every field is its), or "" (not known: a delete, a Secret, whose values are
	// never kept, or a write logged without its response).
	Changes     []Change `json:"changes"`
	ChangesFrom string   `json:"changesFrom,omitempty"`
	// ChangesTruncated says Changes are not all the write changed: it changed more than the audit
	// events keep of one write (64 fields, 4 KiB), or its changes were dropped, oldest first, to
	// keep them within their memory bound.
	ChangesTruncated bool `json:"changesTruncated,omitempty"`
	// From is the source that saw the write (drift.Actor.From). A write seen only in
	// "admission" was admitted, not necessarily made: a later step may have refused it.
	From string `json:"from,omitempty"`
	// Via is who wrote for User when a tool did (drift.Actor.Via): argocd-server's
	// ServiceAccount, for a write From "Argo CD".
	Via string `json:"via,omitempty"`
}

// Change is a field a write changed: Old → New. Change is changed, added, removed, or set (the
// old value is not known).
type Change struct {
	Path   string `json:"path"`
	Old    any    `json:"old"`
	New    any    `json:"new"`
	Change string `json:"change"`
}

// Ref names the object to blame as a person types it.
type Ref struct {
	// Kind as in the manifest, case-insensitive ("deployment"; a plural "deployments" too);
	// Group narrows it when two groups have the kind ("deployment.apps").
	Kind, Group string
	// Namespace may be empty when the name is unique among the env's objects of the kind.
	Namespace, Name string
}

// ParseRef reads KIND/NAME or KIND.GROUP/NAME.
func ParseRef(s, namespace string) (Ref, error) {
	kind, name, ok := strings.Cut(s, "/")
	if !ok || kind == "" || name == "" || strings.Contains(name, "/") {
		return Ref{}, fmt.Errorf("object %q: want KIND/NAME (e.g. deployment/vllm-qwen)", s)
	}
	r := Ref{Kind: kind, Namespace: namespace, Name: name}
	if k, g, ok := strings.Cut(kind, "."); ok {
		r.Kind, r.Group = k, g
	}
	return r, nil
}

func (r Ref) String() string {
	k := r.Kind
	if r.Group != "" {
		k += "." + r.Group
	}
	if r.Namespace != "" {
		return k + " " + r.Namespace + "/" + r.Name
	}
	return k + " " + r.Name
}

// NotDeclaredError is an object Git does not declare in the env at the revision, or declares more
// than once when the namespace is left out (Candidates lists them then).
type NotDeclaredError struct {
	Ref        Ref
	Env        string
	Revision   string
	Candidates []string
	// Applications are, for an env without an overlay of its own (its layout file's), the env's
	// Applications looked in, as "name (path)" or "name (path: why it was not walked)"; nil for
	// an env of the convention (overlays/<env>).
	Applications []string
}

func (e *NotDeclaredError) Error() string {
	switch {
	case len(e.Candidates) > 0:
		return fmt.Sprintf("%s is ambiguous in env %s at %.12s: %s (give the namespace, -n)", e.Ref, e.Env, e.Revision, strings.Join(e.Candidates, ", "))
	case e.Applications == nil:
		return fmt.Sprintf("%s is not declared in env %s at %.12s", e.Ref, e.Env, e.Revision)
	case len(e.Applications) == 0:
		return fmt.Sprintf("%s is not declared in env %s at %.12s: the env has no overlay of its own, and Git declares none of its Applications there (no path its root syncs)",
			e.Ref, e.Env, e.Revision)
	}
	return fmt.Sprintf("%s is not declared in env %s at %.12s: none of the env's Applications renders it (%s)", e.Ref, e.Env, e.Revision, strings.Join(e.Applications, ", "))
}
