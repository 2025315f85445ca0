package argocd

import (
	"fmt"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"

	"github.com/llm-gitops/platform/internal/engine/render"
)

// KustomizeOptions are the kustomize options besides patches Argo CD's repo-server applies to
// the Application's source path at revision (nil when it sets none): images and common labels
// with Argo CD's build environment substituted, common annotations too when
// commonAnnotationsEnvsubst asks.
func (a *App) KustomizeOptions(revision string) (*render.KustomizeOptions, error) {
	return a.kustomizeOptions(a.kustomize, a.RepoURL, a.Path, a.TargetRevision, revision)
}

// SourceKustomizeOptions are KustomizeOptions for source j of a multi-source Application.
func (a *App) SourceKustomizeOptions(j int, revision string) (*render.KustomizeOptions, error) {
	s := a.Sources[j]
	return a.kustomizeOptions(s.kustomize, s.RepoURL, s.Path, s.TargetRevision, revision)
}

func (a *App) kustomizeOptions(k *v1alpha1.ApplicationSourceKustomize, repoURL, sourcePath, targetRevision, revision string) (*render.KustomizeOptions, error) {
	if k == nil {
		return nil, nil
	}
	env := a.buildEnv(repoURL, sourcePath, targetRevision, revision)
	out := &render.KustomizeOptions{
		NamePrefix: k.NamePrefix, NameSuffix: k.NameSuffix, Namespace: k.Namespace,
		ForceCommonLabels: k.ForceCommonLabels, LabelWithoutSelector: k.LabelWithoutSelector,
		LabelIncludeTemplates: k.LabelIncludeTemplates, ForceCommonAnnotations: k.ForceCommonAnnotations,
		Components: k.Components, IgnoreMissingComponents: k.IgnoreMissingComponents,
	}
	for _, img := range k.Images {
		out.Images = append(out.Images, env.Envsubst(string(img)))
	}
	for _, r := range k.Replicas {
		n, err := r.GetIntCount()
		if err != nil {
			return nil, fmt.Errorf("kustomize replicas %s: %w", r.Name, err)
		}
		out.Replicas = append(out.Replicas, render.KustomizeReplica{Name: r.Name, Count: int64(n)})
	}
	if len(k.CommonLabels) > 0 {
		out.CommonLabels = map[string]string{}
		for name, v := range k.CommonLabels {
			out.CommonLabels[name] = env.Envsubst(v)
		}
	}
	if len(k.CommonAnnotations) > 0 {
		out.CommonAnnotations = map[string]string{}
		for name, v := range k.CommonAnnotations {
			if k.CommonAnnotationsEnvsubst {
				v = env.Envsubst(v)
			}
			out.CommonAnnotations[name] = v
		}
	}
	if out.Empty() {
		return nil, nil
	}
	return out, nil
}
