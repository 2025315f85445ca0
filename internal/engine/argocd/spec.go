package argocd

import (
	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Spec returns the Application in Argo CD's own types, with the spec the auditor audits (Git's,
// for an Application another declares; the synced source's options) and the synced
// revisions: what a request to Argo CD's repo-server is built from.
func (a *App) Spec() *v1alpha1.Application {
	out := &v1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: a.Namespace},
		Spec: v1alpha1.ApplicationSpec{Project: a.Project, Destination: v1alpha1.ApplicationDestination{
			Server: a.DestinationServer, Name: a.DestinationName, Namespace: a.DestinationNamespace}},
	}
	if len(a.Sources) == 0 {
		src := a.source
		src.RepoURL, src.Path, src.TargetRevision, src.Chart = a.RepoURL, a.Path, a.TargetRevision, a.Chart
		out.Spec.Source = &src
		out.Status.Sync.Revision = a.SyncedRevision
		return out
	}
	for _, s := range a.Sources {
		out.Spec.Sources = append(out.Spec.Sources, s.raw)
		out.Status.Sync.Revisions = append(out.Status.Sync.Revisions, s.SyncedRevision)
	}
	return out
}
