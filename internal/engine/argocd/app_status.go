package argocd

import (
	"strings"
	"time"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
)

// primarySource is the index of the source of sources the auditor reads as the Application's:
// the first whose path is under overlays/, else the last with a path, else the first.
func primarySource(sources v1alpha1.ApplicationSources) int {
	src := -1
	for j, s := range sources {
		if strings.HasPrefix(s.Path, "overlays/") {
			src = j
			break
		}
	}
	for j, s := range sources {
		if src < 0 && s.Path != "" {
			src = j
		}
	}
	return max(src, 0)
}

// operationOf is the Application's operation op, at the revision of its source src.
func operationOf(op *v1alpha1.OperationState, src int) *Operation {
	o := &Operation{Phase: string(op.Phase), Message: op.Message}
	switch {
	case op.SyncResult != nil && src < len(op.SyncResult.Revisions):
		o.Revision = op.SyncResult.Revisions[src]
	case op.SyncResult != nil && op.SyncResult.Revision != "":
		o.Revision = op.SyncResult.Revision
	case op.Operation.Sync != nil && src < len(op.Operation.Sync.Revisions):
		o.Revision = op.Operation.Sync.Revisions[src]
	case op.Operation.Sync != nil:
		o.Revision = op.Operation.Sync.Revision
	}
	return o
}

// statusOf is what app's status says of its last comparison, at compared: each resource's
// sync status and the comparison's error.
func statusOf(app *v1alpha1.Application, compared string) *Status {
	st := &Status{Revision: compared, ReconciledAt: app.Status.ReconciledAt.UTC().Format(time.RFC3339),
		Resources: make(map[string]string, len(app.Status.Resources)), comparedTo: app.Status.Sync.ComparedTo.Source}
	for _, r := range app.Status.Resources {
		st.Resources[ResourceKey(r.Group, r.Kind, r.Namespace, r.Name)] = string(r.Status)
	}
	for _, c := range app.Status.Conditions {
		if c.Type == v1alpha1.ApplicationConditionComparisonError || c.Type == v1alpha1.ApplicationConditionInvalidSpecError {
			st.Error = c.Type + ": " + c.Message
		}
	}
	if st.Error == "" && app.Status.Sync.Status == v1alpha1.SyncStatusCodeUnknown {
		st.Error = "sync status Unknown"
	}
	return st
}
