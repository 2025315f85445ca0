package argocd

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
)

// syncedRevisions returns the revisions (one per source) of the last successful sync.
func syncedRevisions(app *v1alpha1.Application) []string {
	if h := app.Status.History; len(h) > 0 {
		last := h[len(h)-1]
		if len(last.Revisions) > 0 {
			return last.Revisions
		}
		return []string{last.Revision}
	}
	if op := app.Status.OperationState; op != nil && op.Phase == "Succeeded" && op.SyncResult != nil {
		if len(op.SyncResult.Revisions) > 0 {
			return op.SyncResult.Revisions
		}
		return []string{op.SyncResult.Revision}
	}
	return nil
}

// sourceKustomize returns the kustomize options of source src of the Application's spec.
func sourceKustomize(app *v1alpha1.Application, src int) *v1alpha1.ApplicationSourceKustomize {
	switch {
	case len(app.Spec.Sources) > src:
		return app.Spec.Sources[src].Kustomize
	case app.Spec.Source != nil:
		return app.Spec.Source.Kustomize
	}
	return nil
}

// sources reads a multi-source Application's sources (nil for one source): each as synced (the
// last history entry's source, when it records one) with its synced revision, else as its spec
// says with the revision last compared.
func sources(app *v1alpha1.Application, synced []string) ([]Source, error) {
	if len(app.Spec.Sources) < 2 {
		return nil, nil
	}
	var last []v1alpha1.ApplicationSource
	if h := app.Status.History; len(h) > 0 && len(h[len(h)-1].Sources) == len(app.Spec.Sources) {
		last = h[len(h)-1].Sources
	}
	out := make([]Source, len(app.Spec.Sources))
	for j, s := range app.Spec.Sources {
		rev := ""
		if j < len(app.Status.Sync.Revisions) {
			rev = app.Status.Sync.Revisions[j]
		}
		// The synced revisions are by the index of the synced sources: only when the history
		// entry has as many as the spec are they this source's.
		matched := last != nil || len(app.Status.History) == 0 && len(synced) == len(app.Spec.Sources)
		if matched && j < len(synced) && synced[j] != "" {
			rev = synced[j]
			if last != nil {
				s = last[j]
			}
		}
		patches, other, err := kustomizeOptions(s.Kustomize)
		if err != nil {
			return nil, fmt.Errorf("source %d: %w", j+1, err)
		}
		out[j] = Source{RepoURL: s.RepoURL, Path: s.Path, TargetRevision: s.TargetRevision, Ref: s.Ref, SyncedRevision: rev,
			KustomizePatches: patches, KustomizeUnsupported: other, helm: s.Helm, kustomize: s.Kustomize, directory: s.Directory, raw: *s.DeepCopy()}
	}
	return out, nil
}

// sourceHelm returns the helm options of source src of the Application's spec.
func sourceHelm(app *v1alpha1.Application, src int) *v1alpha1.ApplicationSourceHelm {
	switch {
	case len(app.Spec.Sources) > src:
		return app.Spec.Sources[src].Helm
	case app.Spec.Source != nil:
		return app.Spec.Source.Helm
	}
	return nil
}

// sourceDirectory returns the directory options of source src of the Application's spec.
func sourceDirectory(app *v1alpha1.Application, src int) *v1alpha1.ApplicationSourceDirectory {
	switch {
	case len(app.Spec.Sources) > src:
		return app.Spec.Sources[src].Directory
	case app.Spec.Source != nil:
		return app.Spec.Source.Directory
	}
	return nil
}

// kustomizeOptions splits a source's kustomize options into its patches, in their JSON form, and
// the names of the options set besides.
func kustomizeOptions(k *v1alpha1.ApplicationSourceKustomize) (patches []map[string]any, other []string, err error) {
	if k == nil {
		return nil, nil, nil
	}
	if len(k.Patches) > 0 {
		data, err := json.Marshal(k.Patches)
		if err != nil {
			return nil, nil, fmt.Errorf("kustomize patches: %w", err)
		}
		if err := json.Unmarshal(data, &patches); err != nil {
			return nil, nil, fmt.Errorf("kustomize patches: %w", err)
		}
	}
	// What the auditor applies (Kustomize: namePrefix ... components) is not listed; the rest
	// (a kustomize version of its own, kubeVersion and apiVersions for helmCharts) is.
	rest := v1alpha1.ApplicationSourceKustomize{Version: k.Version, KubeVersion: k.KubeVersion, APIVersions: k.APIVersions}
	data, err := json.Marshal(rest)
	if err != nil {
		return nil, nil, err
	}
	var set map[string]any
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, nil, err
	}
	for name := range set {
		other = append(other, name)
	}
	sort.Strings(other)
	return patches, other, nil
}

// unrenderable says why a source cannot be rendered in process as Argo CD renders it, or "".
func unrenderable(app *v1alpha1.Application) string {
	if len(app.Spec.Sources) > 1 {
		for j := range app.Spec.Sources {
			s := &app.Spec.Sources[j]
			if s.Path == "" && s.Chart == "" {
				continue // a ref source: the others read its files
			}
			if why := sourceUnrenderable(s); why != "" {
				return fmt.Sprintf("source %d: %s", j+1, why)
			}
		}
		return ""
	}
	src := app.Spec.Source
	if len(app.Spec.Sources) == 1 {
		src = &app.Spec.Sources[0]
	}
	if src != nil && src.Chart != "" && len(app.Spec.Sources) == 0 && src.Plugin == nil {
		return "" // a chart of a chart repository: fetched and rendered
	}
	return sourceUnrenderable(src)
}

// sourceUnrenderable says why one source cannot be rendered in process, or "".
func sourceUnrenderable(src *v1alpha1.ApplicationSource) string {
	switch {
	case src == nil:
		return "no source"
	case src.Chart != "":
		return fmt.Sprintf("Helm chart %s %s from %s in spec.sources", src.Chart, src.TargetRevision, src.RepoURL)
	case src.Plugin != nil:
		return "a config management plugin"
	}
	return ""
}

// InCluster says whether an Application's destination (server URL or cluster name) is the
// cluster Argo CD runs in: https://kubernetes.default.svc, or the name in-cluster.
func InCluster(server, name string) bool {
	return server == "https://kubernetes.default.svc" || server == "" && (name == "" || name == "in-cluster")
}
