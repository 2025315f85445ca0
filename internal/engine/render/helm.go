package render

// Helm charts in Git, rendered in process as Argo CD's repo-server renders them: `helm template`
// with the Application's helm options (argo-cd reposerver/repository helmTemplate and util/helm).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chartvalues "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/ignore"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/yaml"
)

// HelmVersion is the Helm SDK the auditor renders charts with: the release Argo CD's repo-server
// runs (argo-cd hack/tool-versions.sh).
const HelmVersion = "v4.3.1"

// HelmOptions are what Argo CD passes to `helm template` for an Application whose source path is
// a chart: its spec.source.helm, the release name and namespace it defaults to, and the
// destination cluster's version and API versions.
type HelmOptions struct {
	// ReleaseName is --name-template (Argo CD: helm.releaseName, else the Application's name).
	ReleaseName string `json:"releaseName"`
	// Namespace is --namespace (helm.namespace, else the destination namespace; "default" when
	// both are empty, as helm without a kubeconfig).
	Namespace string `json:"namespace,omitempty"`
	// ValueFiles are --values, relative to the chart (an absolute path is from the repository
	// root); a glob expands in lexical order.
	ValueFiles []string `json:"valueFiles,omitempty"`
	// RefValues are the value files that name another source of a multi-source Application
	// ("$values/envs/prod.yaml", as ValueFiles lists them) with their content, read by the caller
	// from that source at its revision.
	RefValues map[string]string `json:"refValues,omitempty"`
	// IgnoreMissingValueFiles skips value files that do not exist instead of failing.
	IgnoreMissingValueFiles bool `json:"ignoreMissingValueFiles,omitempty"`
	// Values is helm.values or helm.valuesObject as YAML: the last values file.
	Values string `json:"values,omitempty"`
	// Parameters are --set (or --set-string when ForceString), FileParameters --set-file.
	Parameters     []HelmParameter `json:"parameters,omitempty"`
	FileParameters []HelmParameter `json:"fileParameters,omitempty"`
	// SkipCrds leaves out the chart's crds/ directory (Argo CD passes --include-crds otherwise);
	// SkipTests its test hooks; SkipSchemaValidation its values.schema.json check.
	SkipCrds             bool `json:"skipCrds,omitempty"`
	SkipTests            bool `json:"skipTests,omitempty"`
	SkipSchemaValidation bool `json:"skipSchemaValidation,omitempty"`
	// KubeVersion is --kube-version (e.g. 1.37.2) and APIVersions --api-versions: the
	// destination cluster's, as Argo CD's controller sends them. Empty: Helm's defaults.
	KubeVersion string   `json:"kubeVersion,omitempty"`
	APIVersions []string `json:"apiVersions,omitempty"`
	// Explicit says the Application names Helm as its source type (helm options set): a chart
	// is then rendered by helm even where a kustomization is beside its Chart.yaml.
	Explicit bool `json:"explicit,omitempty"`
}

// LimitError is a source the auditor cannot render the way Argo CD would: a limit of the
// auditor's, not a fault of the source (a dependency Argo CD would fetch, a remote values file).
type LimitError struct{ Msg string }

func (e *LimitError) Error() string { return e.Msg }

func limitf(format string, args ...any) error { return &LimitError{Msg: fmt.Sprintf(format, args...)} }

// HelmParameter is one helm.parameters (Value) or helm.fileParameters (Value is the path) entry.
type HelmParameter struct {
	Name        string `json:"name"`
	Value       string `json:"value"`
	ForceString bool   `json:"forceString,omitempty"`
}

// digest identifies the options (the cache keeps a chart's render under it).
func (h *HelmOptions) digest() string {
	if h == nil {
		return ""
	}
	data, _ := json.Marshal(struct {
		Helm string       `json:"helm"`
		Opts *HelmOptions `json:"opts"`
	}{HelmVersion, h})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// WithHelm returns the Source rendering charts with an Application's helm options. A Source
// without them renders a chart as Argo CD does with none (release name "release-name" is never
// what Argo CD uses: set ReleaseName).
func (s Source) WithHelm(h *HelmOptions) Source {
	if h == nil {
		return s
	}
	out := s
	out.helm = h
	out.variant = joinVariant(s.variant, "h"+h.digest())
	return out
}

func joinVariant(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "+" + b
}

// isChart says whether the path holds a Helm chart (Chart.yaml), as Argo CD tells a Helm source.
func (s Source) isChart(rel string) bool {
	return s.fs.Exists(filepath.Join(s.root, rel, "Chart.yaml"))
}

// renderChart runs `helm template` in process over the chart at rel, as Argo CD's repo-server
// does: the chart's files as `helm` loads a directory (.helmignore applied), the values merged
// in helm's order (value files, then the Application's values, then --set, --set-string,
// --set-file), CRDs included unless skipped, hooks kept (Argo CD runs them; the audit leaves them
// out). A chart whose dependencies are not under charts/ is an error: Argo CD would fetch them.
func (s Source) renderChart(rel string) (*Result, error) {
	opts := s.helm
	if opts == nil {
		opts = &HelmOptions{}
	}
	if r, ok := s.fs.(*recordingFS); ok {
		r.noteHelm(rel, s.helm)
	}
	ch, err := s.loadChart(rel)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", rel, err)
	}
	if missing := missingDependencies(ch); len(missing) > 0 {
		return nil, fmt.Errorf("render %s: %w", rel, limitf("dependencies %s are in Chart.yaml but not under charts/ (Argo CD runs `helm dependency build` from the chart repositories; the auditor renders only dependencies committed under charts/)", strings.Join(missing, ", ")))
	}
	if t := ch.Metadata.Type; t != "" && t != "application" {
		return nil, fmt.Errorf("render %s: %s charts are not installable", rel, t)
	}
	vals, err := s.helmValues(rel, opts)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", rel, err)
	}
	out, err := helmTemplate(ch, vals, opts)
	if err != nil {
		return nil, fmt.Errorf("render %s: helm template: %w", rel, err)
	}
	objs, err := decodeManifests(rel+" (helm template)", out)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", rel, err)
	}
	sum := sha256.Sum256(out)
	return &Result{Path: rel, Revision: s.revision, Objects: objs, YAML: out, Digest: hex.EncodeToString(sum[:])}, nil
}

// helmTemplate is what `helm template --include-crds` prints for a loaded chart (helm's install
// action in client-only dry-run, without its cluster client and release storage): the CRDs, the
// manifests in helm's install order, then the hooks.
func helmTemplate(ch *chartv2.Chart, vals map[string]any, opts *HelmOptions) ([]byte, error) {
	name, ns := opts.ReleaseName, opts.Namespace
	if name == "" {
		name = "release-name"
	}
	if ns == "" {
		ns = "default"
	}
	if err := chartutil.ValidateReleaseName(name); err != nil {
		return nil, fmt.Errorf("release name %q: %w", name, err)
	}
	caps := common.DefaultCapabilities.Copy()
	if opts.KubeVersion != "" {
		kv, err := common.ParseKubeVersion(opts.KubeVersion)
		if err != nil {
			return nil, fmt.Errorf("kube version %q: %w", opts.KubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	caps.APIVersions = append(caps.APIVersions, opts.APIVersions...)
	if err := chartutil.ProcessDependencies(ch, vals); err != nil {
		return nil, fmt.Errorf("chart dependencies: %w", err)
	}
	if c := ch.Metadata.KubeVersion; c != "" && !chartutil.IsCompatibleRange(c, caps.KubeVersion.String()) {
		if opts.KubeVersion == "" { // no destination cluster to ask: helm's default
			return nil, limitf("chart requires kubeVersion: %s, and without a destination cluster helm's default is Kubernetes %s", c, caps.KubeVersion.Version)
		}
		return nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", c, caps.KubeVersion.Version)
	}
	rvals, err := chartvalues.ToRenderValuesWithSchemaValidation(ch, vals,
		common.ReleaseOptions{Name: name, Namespace: ns, Revision: 1, IsInstall: true}, caps, opts.SkipSchemaValidation)
	if err != nil {
		return nil, err
	}
	var e engine.Engine
	files, err := e.RenderWithContext(context.Background(), ch, rvals)
	if err != nil {
		return nil, err
	}
	for k := range files {
		if strings.HasSuffix(k, "NOTES.txt") {
			delete(files, k)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if !opts.SkipCrds {
		for _, crd := range ch.CRDObjects() {
			fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", crd.Filename, crd.File.Data)
		}
	}
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	for _, h := range hooks {
		if opts.SkipTests && slices.Contains(h.Events, releasev1.HookTest) {
			continue
		}
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	return b.Bytes(), nil
}

// missingDependencies names the dependencies Chart.yaml declares that charts/ does not hold.
func missingDependencies(ch *chartv2.Chart) []string {
	var missing []string
	for _, d := range ch.Metadata.Dependencies {
		if !slices.ContainsFunc(ch.Dependencies(), func(c *chartv2.Chart) bool { return c.Name() == d.Name }) {
			missing = append(missing, d.Name)
		}
	}
	return missing
}

// loadChart reads the chart's files from the Source as helm's directory loader does: every
// file below the chart but those .helmignore (and helm's defaults) leave out.
func (s Source) loadChart(rel string) (*chartv2.Chart, error) {
	top := filepath.Join(s.root, rel)
	rules := ignore.Empty()
	if data, err := s.fs.ReadFile(filepath.Join(top, ignore.HelmIgnore)); err == nil {
		if rules, err = ignore.Parse(bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join(rel, ignore.HelmIgnore), err)
		}
	}
	rules.AddDefaults()
	var files []*archive.BufferedFile
	err := s.fs.Walk(top, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		n, rerr := filepath.Rel(top, p)
		if rerr != nil || n == "." {
			return nil
		}
		n = filepath.ToSlash(n)
		if rules.Ignore(n, fi) {
			if fi.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if fi.IsDir() {
			return nil
		}
		data, err := s.fs.ReadFile(p)
		if err != nil {
			return fmt.Errorf("%s: %w", path.Join(rel, n), err)
		}
		files = append(files, &archive.BufferedFile{Name: n, ModTime: time.Time{}, Data: bytes.TrimPrefix(data, []byte("\xEF\xBB\xBF"))})
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if f.Name != "Chart.yaml" {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
		}
		if err := yaml.Unmarshal(f.Data, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join(rel, "Chart.yaml"), err)
		}
		if meta.APIVersion != chartv2.APIVersionV1 && meta.APIVersion != chartv2.APIVersionV2 && meta.APIVersion != "" {
			return nil, limitf("%s: chart apiVersion %q: the auditor renders charts of apiVersion v1 and v2", path.Join(rel, "Chart.yaml"), meta.APIVersion)
		}
	}
	ch, err := chartloader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	return ch, nil
}

// setValue escapes commas in a --set value as Argo CD does, except in a {a,b} list.
func setValue(v string) string {
	if strings.HasPrefix(v, "{") && strings.HasSuffix(v, "}") {
		return v
	}
	var b strings.Builder
	var prev rune
	for _, r := range v {
		if r == ',' && prev != '\\' {
			b.WriteString(`\,`)
		} else {
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}

func isGlob(p string) bool { return strings.ContainsAny(p, "*?[") }
