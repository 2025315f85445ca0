package argocd

import (
	"strings"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/llm-gitops/platform/internal/engine/render"
)

// Cluster is what Argo CD's controller tells its repo-server about the destination cluster: the
// server version and the API versions it serves ("group/version" and "group/version/Kind").
type Cluster struct {
	KubeVersion string
	APIVersions []string
}

// HelmOptions are the options Argo CD's repo-server renders the Application's source with when
// its path is a Helm chart, at revision (the commit rendered) on cluster c: the release name (the
// Application's name unless helm.releaseName), the namespace (helm.namespace, else the
// destination's), value files, values or valuesObject, parameters with Argo CD's build
// environment ($ARGOCD_APP_NAME, $ARGOCD_APP_REVISION, ...) substituted, and the cluster's
// version and API versions unless the source pins its own.
func (a *App) HelmOptions(revision string, c Cluster) *render.HelmOptions {
	return a.helmOptions(a.helm, a.RepoURL, a.Path, a.TargetRevision, revision, c)
}

// SourceHelmOptions are HelmOptions for source j of a multi-source Application. Value files of
// another source ($ref/...) are listed as they are; the caller reads them (RefValues).
func (a *App) SourceHelmOptions(j int, revision string, c Cluster) *render.HelmOptions {
	s := a.Sources[j]
	return a.helmOptions(s.helm, s.RepoURL, s.Path, s.TargetRevision, revision, c)
}

func (a *App) helmOptions(h *v1alpha1.ApplicationSourceHelm, repoURL, sourcePath, targetRevision, revision string, c Cluster) *render.HelmOptions {
	explicit := h != nil
	if h == nil {
		h = &v1alpha1.ApplicationSourceHelm{}
	}
	env := a.buildEnv(repoURL, sourcePath, targetRevision, revision)
	opts := &render.HelmOptions{
		ReleaseName: a.Name, Namespace: a.DestinationNamespace,
		IgnoreMissingValueFiles: h.IgnoreMissingValueFiles, SkipCrds: h.SkipCrds, SkipTests: h.SkipTests,
		SkipSchemaValidation: h.SkipSchemaValidation,
		KubeVersion:          c.KubeVersion, APIVersions: c.APIVersions, Explicit: explicit,
	}
	if h.ReleaseName != "" {
		opts.ReleaseName = h.ReleaseName
	}
	if h.Namespace != "" {
		opts.Namespace = h.Namespace
	}
	if h.KubeVersion != "" {
		opts.KubeVersion = h.KubeVersion
	}
	if len(h.APIVersions) > 0 {
		opts.APIVersions = h.APIVersions
	}
	if v, err := version.ParseGeneric(opts.KubeVersion); err == nil {
		opts.KubeVersion = v.String() // as the repo-server parses it: no "v", no vendor suffix
	}
	for _, f := range h.ValueFiles {
		if ref, rest, _ := strings.Cut(f, "/"); a.hasRef(ref) { // another source's: substituted after its ref, as Argo CD does
			f = ref + "/" + env.Envsubst(rest)
		} else {
			f = env.Envsubst(f)
		}
		opts.ValueFiles = append(opts.ValueFiles, f)
	}
	opts.Values = string(h.ValuesYAML())
	for _, p := range h.Parameters {
		opts.Parameters = append(opts.Parameters, render.HelmParameter{Name: p.Name, Value: env.Envsubst(p.Value), ForceString: p.ForceString})
	}
	for _, p := range h.FileParameters {
		v := env.Envsubst(p.Path)
		if ref, _, _ := strings.Cut(p.Path, "/"); a.hasRef(ref) {
			v = p.Path // another source's file, which the render names as such
		}
		opts.FileParameters = append(opts.FileParameters, render.HelmParameter{Name: p.Name, Value: v})
	}
	return opts
}

// hasRef says whether "$name" names a ref source of the Application.
func (a *App) hasRef(ref string) bool {
	for _, s := range a.Sources {
		if s.Ref != "" && "$"+s.Ref == ref {
			return true
		}
	}
	return false
}

// buildEnv is the build environment Argo CD's repo-server substitutes in a source's options.
func (a *App) buildEnv(repoURL, sourcePath, targetRevision, revision string) v1alpha1.Env {
	short := func(n int) string {
		if len(revision) > n {
			return revision[:n]
		}
		return revision
	}
	var env v1alpha1.Env
	for _, e := range [][2]string{
		{"ARGOCD_APP_NAME", a.InstanceName()}, {"ARGOCD_APP_NAMESPACE", a.DestinationNamespace},
		{"ARGOCD_APP_PROJECT_NAME", a.Project}, {"ARGOCD_APP_REVISION", revision},
		{"ARGOCD_APP_REVISION_SHORT", short(7)}, {"ARGOCD_APP_REVISION_SHORT_8", short(8)},
		{"ARGOCD_APP_SOURCE_REPO_URL", repoURL}, {"ARGOCD_APP_SOURCE_PATH", sourcePath},
		{"ARGOCD_APP_SOURCE_TARGET_REVISION", targetRevision},
	} {
		env = append(env, &v1alpha1.EnvEntry{Name: e[0], Value: e[1]})
	}
	return env
}
