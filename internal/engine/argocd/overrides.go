package argocd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	jsonpatch "github.com/evanphx/json-patch"
	"sigs.k8s.io/yaml"
)

// SourceOverrideFiles are the files of a source path Argo CD's repo-server merges into the
// source before it renders it, in its order: .argocd-source.yaml, then
// .argocd-source-<Application>.yaml (what Argo CD Image Updater writes back to Git).
func SourceOverrideFiles(app, sourcePath string) []string {
	return []string{path.Join(sourcePath, ".argocd-source.yaml"), path.Join(sourcePath, ".argocd-source-"+app+".yaml")}
}

// WithOverrides returns the Application with the override files of its audited source (and of
// each source of a multi-source one) merged as Argo CD merges them: each a JSON merge patch of
// the source, of which only the config management options (helm, kustomize, directory, plugin)
// are kept. read(rev, name) reads a file of the repository at a source's revision (rev: "" for
// the audited one), with an error wrapping fs.ErrNotExist when it is absent.
func (a *App) WithOverrides(read func(rev, name string) ([]byte, error)) (*App, error) {
	out := *a
	src, changed, err := mergeOverrides(a.source, a.Name, func(name string) ([]byte, error) { return read("", name) })
	if err != nil {
		return nil, err
	}
	if changed {
		if err := out.useSource(src); err != nil {
			return nil, err
		}
	}
	out.Sources = append([]Source(nil), a.Sources...)
	for j := range out.Sources {
		s := &out.Sources[j]
		if s.Path == "" {
			continue
		}
		rev := s.SyncedRevision
		merged, changed, err := mergeOverrides(s.raw, a.Name, func(name string) ([]byte, error) { return read(rev, name) })
		if err != nil {
			return nil, fmt.Errorf("source %d: %w", j+1, err)
		}
		if !changed {
			continue
		}
		s.raw, s.helm, s.kustomize, s.directory = merged, merged.Helm, merged.Kustomize, merged.Directory
		if s.KustomizePatches, s.KustomizeUnsupported, err = kustomizeOptions(merged.Kustomize); err != nil {
			return nil, fmt.Errorf("source %d: %w", j+1, err)
		}
	}
	return &out, nil
}

// useSource makes src the audited source: its helm and kustomize options, and whether the
// auditor can render it.
func (a *App) useSource(src v1alpha1.ApplicationSource) error {
	var err error
	a.source, a.helm, a.kustomize, a.directory = src, src.Helm, src.Kustomize, src.Directory
	if a.KustomizePatches, a.KustomizeUnsupported, err = kustomizeOptions(src.Kustomize); err != nil {
		return err
	}
	if len(a.Sources) == 0 && a.Unrenderable == "" && src.Chart == "" {
		a.Unrenderable = sourceUnrenderable(&src)
	}
	return nil
}

// mergeOverrides merges a source's override files into it (argo-cd reposerver
// mergeSourceParameters); changed says whether any file was there.
func mergeOverrides(src v1alpha1.ApplicationSource, app string, read func(name string) ([]byte, error)) (v1alpha1.ApplicationSource, bool, error) {
	merged := *src.DeepCopy()
	changed := false
	for _, name := range SourceOverrideFiles(app, src.Path) {
		patch, err := read(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return src, false, fmt.Errorf("%s: %w", name, err)
		}
		data, err := json.Marshal(merged)
		if err != nil {
			return src, false, fmt.Errorf("%s: %w", name, err)
		}
		if patch, err = yaml.YAMLToJSON(patch); err != nil {
			return src, false, fmt.Errorf("%s: %w", name, err)
		}
		if data, err = jsonpatch.MergePatch(data, patch); err != nil {
			return src, false, fmt.Errorf("%s: %w", name, err)
		}
		var next v1alpha1.ApplicationSource
		if err := json.Unmarshal(data, &next); err != nil {
			return src, false, fmt.Errorf("%s: %w", name, err)
		}
		merged, changed = next, true
	}
	// Only the config management options count, as in Argo CD.
	merged.Chart, merged.Path, merged.RepoURL, merged.TargetRevision = src.Chart, src.Path, src.RepoURL, src.TargetRevision
	return merged, changed, nil
}

// TypeError is Argo CD's error for a source that names more than one type (helm and kustomize
// options both set, ...), which it refuses to render; nil otherwise.
func (a *App) TypeError() error {
	srcs := []v1alpha1.ApplicationSource{a.source}
	if len(a.Sources) > 0 {
		srcs = nil
		for _, s := range a.Sources {
			if s.Path != "" {
				srcs = append(srcs, s.raw)
			}
		}
	}
	for i := range srcs {
		if _, err := srcs[i].ExplicitType(); err != nil {
			return err
		}
	}
	return nil
}
