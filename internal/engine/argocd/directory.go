package argocd

import (
	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"

	"github.com/llm-gitops/platform/internal/engine/render"
)

// DirectoryOptions are the directory options Argo CD's repo-server reads the Application's source
// path with at revision (the commit rendered), nil when the source sets none: which files
// (recurse, include, exclude, the extension filter) and the Jsonnet options, with Argo CD's
// build environment ($ARGOCD_APP_NAME, $ARGOCD_APP_REVISION, ...) for the values of the
// top-level arguments and external variables. A source that sets them, even empty, is a
// directory source whatever its path holds.
func (a *App) DirectoryOptions(revision string) *render.DirectoryOptions {
	return a.directoryOptions(a.directory, a.RepoURL, a.Path, a.TargetRevision, revision)
}

// SourceDirectoryOptions are DirectoryOptions for source j of a multi-source Application.
func (a *App) SourceDirectoryOptions(j int, revision string) *render.DirectoryOptions {
	s := a.Sources[j]
	return a.directoryOptions(s.directory, s.RepoURL, s.Path, s.TargetRevision, revision)
}

func (a *App) directoryOptions(d *v1alpha1.ApplicationSourceDirectory, repoURL, sourcePath, targetRevision, revision string) *render.DirectoryOptions {
	if d == nil {
		return nil
	}
	out := &render.DirectoryOptions{Recurse: d.Recurse, Exclude: d.Exclude, Include: d.Include, DisableExtensionFilter: d.DisableExtensionFilter,
		Jsonnet: render.JsonnetOptions{Libs: d.Jsonnet.Libs}}
	vars := func(in []v1alpha1.JsonnetVar) []render.JsonnetVar {
		var vs []render.JsonnetVar
		for _, v := range in {
			vs = append(vs, render.JsonnetVar{Name: v.Name, Value: v.Value, Code: v.Code})
		}
		return vs
	}
	out.Jsonnet.ExtVars, out.Jsonnet.TLAs = vars(d.Jsonnet.ExtVars), vars(d.Jsonnet.TLAs)
	if len(out.Jsonnet.ExtVars)+len(out.Jsonnet.TLAs) > 0 {
		out.Jsonnet.Env = map[string]string{}
		for _, e := range a.buildEnv(repoURL, sourcePath, targetRevision, revision) {
			out.Jsonnet.Env[e.Name] = e.Value
		}
	}
	return out
}
