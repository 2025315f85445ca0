package drift

// Report is the result of one audit of one environment. Its JSON form is the documented,
// stable output of `auditor diff -o json` and of the daemon's GET /api/v1/drift.
type Report struct {
	Env string `json:"env"`
	// Revision is the Git commit the live state was compared with (the synced one).
	Revision string `json:"revision"`
	// InSync is true when no object drifted (a pending sync alone keeps it true).
	InSync bool `json:"inSync"`
	// PendingSync is true when Git's branch head is ahead of the synced revision.
	PendingSync bool `json:"pendingSync"`
	// HeadRevision is the branch head, set when it differs from Revision.
	HeadRevision string   `json:"headRevision,omitempty"`
	Objects      []Object `json:"objects"`
	// ArgoCDOnly lists objects Argo CD's diff calls OutOfSync where the auditor sees no drift.
	ArgoCDOnly []ArgoOnly `json:"argocdOnly,omitempty"`
	// Operation is set while Argo CD syncs a revision other than Revision (phase Running or
	// Terminating: objects it applied already are compared with the old revision and show as
	// drift until it finishes), or when its last sync to one failed part way.
	Operation *Operation `json:"operation,omitempty"`
	// Excused counts, per field manager, the fields controller rules excused, and how many the
	// audit events showed were the controller's own writes (the rest: on the name alone).
	Excused []Excusal `json:"excused,omitempty"`
	// Notes say how to read the report (controller rules taken on names alone).
	Notes []string `json:"notes,omitempty"`
	// Unverified are objects with a field excused on a controller's name whose write is recent
	// and whose audit event has not arrived: a daemon audits them again shortly.
	Unverified []Unverified `json:"-"`
	// Applications are the Argo CD Applications audited for the env (its group: the root
	// app-of-apps and the Applications it declares), each with what was audited or why not.
	Applications []Application `json:"applications,omitempty"`
}

// Application is one Argo CD Application of an env's group as audited.
type Application struct {
	Name string `json:"name"`
	// Path is the repository path its source renders; Revision the commit audited.
	Path     string `json:"path,omitempty"`
	Revision string `json:"revision,omitempty"`
	// Objects counts the objects Git declares for it; Drifted those that drifted.
	Objects int `json:"objects"`
	Drifted int `json:"drifted"`
	// Error says why it could not be audited (its objects are then not compared; the other
	// Applications are).
	Error string `json:"error,omitempty"`
}

// Operation is an Argo CD sync operation the report must be read with.
type Operation struct {
	Phase    string `json:"phase"`
	Revision string `json:"revision"`
	Message  string `json:"message,omitempty"`
}

// Syncing says whether Argo CD is syncing another revision: drift seen now may be its own work.
func (r *Report) Syncing() bool {
	return r.Operation != nil && (r.Operation.Phase == "Running" || r.Operation.Phase == "Terminating")
}

// ArgoOnly is an object only Argo CD's diff flags, with the reason the auditor does not.
type ArgoOnly struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Note       string `json:"note"`
}

// Object statuses.
const (
	Modified = "Modified"
	Missing  = "Missing"
	Extra    = "Extra"
	// Unknown objects could not be compared: the cluster does not serve their kind (its CRD is
	// missing). The rest of the env is still audited.
	Unknown = "Unknown"
)

// Object is one drifted object.
type Object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Status is Modified, Missing, Extra or Unknown.
	Status string  `json:"status"`
	Fields []Field `json:"fields"`
	// Application is the Argo CD Application whose object it is (Git's: the one that declares
	// it; for an Extra object, the one whose namespaces it is in).
	Application string `json:"application,omitempty"`
	// Note explains an Unknown object, or a Modified one only Argo CD's diff flags.
	Note string `json:"note,omitempty"`
	// Schema is set when the object was compared without the cluster's schema for its kind
	// ("deduced: why"): maps by key, lists as whole values.
	Schema string `json:"schema,omitempty"`
	// Creator names who made an Extra object (its earliest managedFields entry).
	Creator *Writer `json:"creator,omitempty"`
	// Actor is the person behind a Missing or Extra object, from the API server's audit log: who
	// deleted it (Missing: the newest delete of it; Match "deleted"), who created it (Extra: the
	// create that returned its UID, else the newest create of that name whose UID is not known;
	// Match "created"). nil without audit events, or when none says.
	Actor *Actor `json:"actor,omitempty"`
	// ArgoCD is Argo CD's own verdict on the object, when computed.
	ArgoCD *ArgoVerdict `json:"argocd,omitempty"`
}

// Field is one drifted field.
type Field struct {
	// Path like .spec.template.spec.containers[name=vllm].image, for people; derived from
	// FieldPath.
	Path string `json:"path"`
	// FieldPath is the structured path, for programs (adopt patches, ignore rules).
	FieldPath FieldPath `json:"fieldPath,omitempty"`
	Desired   any       `json:"desired"`
	Live      any       `json:"live"`
	// Change is changed, added or removed.
	Change string `json:"change"`
	Writer
	// Actor is the person behind the write, from the API server's audit log; nil without one.
	Actor *Actor `json:"actor,omitempty"`
	// Borrowed is the controller whose field-manager name the write was made under by someone
	// else (Actor): a rule for that controller would have excused it.
	Borrowed string `json:"borrowed,omitempty"`
}

// Actor is who made a write, as the API server's audit log recorded it.
type Actor struct {
	User             string   `json:"user"`
	Groups           []string `json:"groups,omitempty"`
	ImpersonatedUser string   `json:"impersonatedUser,omitempty"`
	SourceIPs        []string `json:"sourceIPs,omitempty"`
	UserAgent        string   `json:"userAgent,omitempty"`
	Verb             string   `json:"verb"`
	// Time is when the API server completed the write (RFC 3339); AuditID the event's ID.
	Time    string `json:"time"`
	AuditID string `json:"auditID,omitempty"`
	// Match says how the write was matched to the field: "changes" (the newest write whose
	// changes, from the audit events, left the live value at the field's path), "resourceVersion"
	// (the write that made the live object as it is), "fieldManager" (the closest write in time
	// under the field's manager) or "latest write" (a removed field: the newest write to the
	// object not the applier's); for an object (Object.Actor), "created" or "deleted".
	Match string `json:"match"`
}

// Writer is a managedFields entry: who wrote, how, and when. An empty Manager means nobody can be
// named: a removed field has no owner, and no watch saw the update that removed it.
type Writer struct {
	Manager     string `json:"manager"`
	Operation   string `json:"operation"`
	Subresource string `json:"subresource"`
	Time        string `json:"time"`
}

// ArgoVerdict is what Argo CD says about an object, and why it disagrees with ours.
type ArgoVerdict struct {
	OutOfSync bool   `json:"outOfSync"`
	Note      string `json:"note,omitempty"`
	// Source says where the verdict comes from: VerdictApplicationStatus, VerdictInProcess, or
	// VerdictNone (then OutOfSync means nothing).
	Source string `json:"source,omitempty"`
	// ReconciledAt is when Argo CD's controller made the comparison (application status only).
	ReconciledAt string `json:"reconciledAt,omitempty"`
}

// Verdict sources.
const (
	// VerdictApplicationStatus is Argo CD's own status: status.resources of the Application, as
	// its controller recorded it when comparing the audited revision.
	VerdictApplicationStatus = "application-status"
	// VerdictInProcess is Argo CD's diff library run by the auditor, used where no controller has
	// compared the audited revision (no Argo CD, or a newer commit awaiting its sync).
	VerdictInProcess = "in-process-diff"
	// VerdictNone is an Argo CD that has no verdict on the object at the audited revision: it
	// compared another revision, could not compare, or lists the object as Unknown.
	VerdictNone = "none"
)

// Counts returns the number of drifted objects and fields.
func (r *Report) Counts() (objects, fields int) {
	for _, o := range r.Objects {
		objects++
		fields += len(o.Fields)
		if len(o.Fields) == 0 {
			fields++
		}
	}
	return objects, fields
}
