// Package layout says how a repository maps its envs to Argo CD Applications, whatever the
// repository's layout: an env is the group of Applications under its root Application (an
// app-of-apps), the Applications an AppProject list or a label selector picks, or one
// Application of its own. The repository says so in LayoutFile at its root; without one, the
// convention of this platform's template holds (overlays/<env>, apps/<env>, root-<env>).
//
// The file also says which rule profile `auditor check` runs (the generic rules always; this
// platform's, ProfileLLMPlatform, where the repository opts in) and which rules are off or
// scoped, with the reason the report prints.
package layout

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"

	yamlv3 "gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// LayoutFile is where a repository describes its layout, at its root.
const LayoutFile = ".auditor.yaml"

// ProfileLLMPlatform runs this platform's own rules in `auditor check` (GPU pools, vLLM, KV
// cache, site values, schedules, ledgers, release pins) beside the generic ones.
const ProfileLLMPlatform = "llm-platform"

// Layout is what the auditor reads of a repository: its envs and the rules check runs.
type Layout struct {
	// File is where the layout was read from (LayoutFile), "" for the convention.
	File string `json:"-" yaml:"-"`
	// Profile names the rule profile beside the generic rules: "" (the generic rules alone) or
	// ProfileLLMPlatform.
	Profile string `json:"profile,omitempty" yaml:"profile,omitempty"`
	// Envs are the repository's envs. Absent from the file: the convention's (Conventional).
	Envs []Env `json:"envs,omitempty" yaml:"envs,omitempty"`
	// Rules turn rules off or scope them to envs, each with its reason.
	Rules []Rule `json:"rules,omitempty" yaml:"rules,omitempty"`
}

// Env is one env: how its Applications are found. At least one of Root, Projects or Selector
// names them (Application too, in the convention).
type Env struct {
	// Name is the env's name (--env).
	Name string `json:"name" yaml:"name"`
	// Namespace holds its root and own Application (default argocd).
	Namespace string `json:"namespace,omitempty" yaml:"namespace,omitempty"`
	// Root is its root Application (an app-of-apps): with it in the cluster, the env is every
	// Application under it.
	Root string `json:"root,omitempty" yaml:"root,omitempty"`
	// RootManifest is the file in Git holding the root's manifest, when Git holds it (it is
	// audited as an object of the root).
	RootManifest string `json:"rootManifest,omitempty" yaml:"rootManifest,omitempty"`
	// Apps is the path the root syncs: the Applications Git declares for the env, read without
	// a cluster (render, check). Default: the root manifest's source path.
	Apps string `json:"apps,omitempty" yaml:"apps,omitempty"`
	// Application is the env's own Application, audited when the cluster has no root, and
	// Overlay the path it renders: this platform's convention (llm-<env> over overlays/<env>),
	// never set by the file.
	Application string `json:"-" yaml:"-"`
	Overlay     string `json:"-" yaml:"-"`
	// Projects and Selector pick Applications from the cluster into the env's group.
	Projects []string `json:"projects,omitempty" yaml:"projects,omitempty"`
	Selector string   `json:"selector,omitempty" yaml:"selector,omitempty"`
}

// Rule turns one rule of `auditor check` off, everywhere or in some envs, with a reason.
type Rule struct {
	// Name is the rule's name as the report prints it (sync-wave-order, vllm-drain, …).
	Name string `json:"name" yaml:"name"`
	// Envs limits the setting to these envs (empty: every env).
	Envs []string `json:"envs,omitempty" yaml:"envs,omitempty"`
	// Reason says why; the report prints it beside each finding the setting silences.
	Reason string `json:"reason" yaml:"reason"`
}

// Conventional is the env named name in this platform's template: its Application llm-<env>
// over overlays/<env>, its root root-<env> over apps/<env>, the root's manifest
// clusters/<env>/root.yaml.
func Conventional(name string) Env {
	return Env{Name: name, Namespace: "argocd", Root: "root-" + name, RootManifest: path.Join("clusters", name, "root.yaml"),
		Apps: path.Join("apps", name), Application: "llm-" + name, Overlay: path.Join("overlays", name)}
}

// Files is what Read needs of a repository: a file's content (fs.ErrNotExist when absent) and
// a directory's entries.
type Files interface {
	ReadFile(rel string) ([]byte, error)
	ReadDir(rel string) ([]string, error)
}

// Read reads the layout of a repository: LayoutFile when it has one, else the convention (an
// env per directory under overlays/ holding a kustomization.yaml; none without overlays/).
func Read(f Files) (*Layout, error) {
	data, err := f.ReadFile(LayoutFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		envs, err := conventionalEnvs(f)
		if err != nil {
			return nil, err
		}
		return &Layout{Envs: envs}, nil
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", LayoutFile, err)
	}
	l, err := Parse(data)
	if err != nil {
		return nil, err
	}
	if l.Envs == nil {
		if l.Envs, err = conventionalEnvs(f); err != nil {
			return nil, err
		}
	}
	return l, l.rootApps(f)
}

// conventionalEnvs are the directories under overlays/ holding a kustomization.yaml.
func conventionalEnvs(f Files) ([]Env, error) {
	names, err := f.ReadDir("overlays")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list overlays: %w", err)
	}
	slices.Sort(names)
	var envs []Env
	for _, n := range names {
		if _, err := f.ReadFile(path.Join("overlays", n, "kustomization.yaml")); err == nil {
			envs = append(envs, Conventional(n))
		}
	}
	return envs, nil
}

// Parse parses a layout file: unknown keys, an env named twice or by nothing, a bad selector
// and a rule without a reason are errors naming the file and the key.
func Parse(data []byte) (*Layout, error) {
	l := &Layout{File: LayoutFile}
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // a misspelt key is an error with its line, never ignored
	if err := dec.Decode(l); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", LayoutFile, err)
	}
	l.File = LayoutFile
	switch l.Profile {
	case "", ProfileLLMPlatform:
	default:
		return nil, fmt.Errorf("%s: profile %q: want %q or none", LayoutFile, l.Profile, ProfileLLMPlatform)
	}
	seen := map[string]bool{}
	for i := range l.Envs {
		e := &l.Envs[i]
		at := fmt.Sprintf("%s: envs[%d]", LayoutFile, i)
		switch {
		case e.Name == "" || strings.ContainsAny(e.Name, `/\ `):
			return nil, fmt.Errorf("%s: name %q: want a name without slashes or spaces", at, e.Name)
		case seen[e.Name]:
			return nil, fmt.Errorf("%s: env %q is listed twice", at, e.Name)
		case e.Root == "" && len(e.Projects) == 0 && e.Selector == "":
			return nil, fmt.Errorf("%s (%s): say how its Applications are found: root, projects or selector", at, e.Name)
		}
		if e.Selector != "" {
			if _, err := labels.Parse(e.Selector); err != nil {
				return nil, fmt.Errorf("%s (%s): selector: %w", at, e.Name, err)
			}
		}
		for _, p := range []*string{&e.RootManifest, &e.Apps} {
			if *p != "" {
				*p = path.Clean(strings.TrimPrefix(*p, "./"))
			}
		}
		if e.Namespace == "" {
			e.Namespace = "argocd"
		}
		seen[e.Name] = true
	}
	for i, r := range l.Rules {
		at := fmt.Sprintf("%s: rules[%d]", LayoutFile, i)
		switch {
		case r.Name == "":
			return nil, fmt.Errorf("%s: name is required", at)
		case strings.TrimSpace(r.Reason) == "":
			return nil, fmt.Errorf("%s (%s): reason is required: the report prints it", at, r.Name)
		}
		for _, env := range r.Envs {
			if len(l.Envs) > 0 && !seen[env] {
				return nil, fmt.Errorf("%s (%s): env %q is not one of the envs", at, r.Name, env)
			}
		}
	}
	return l, nil
}

// rootApps fills each env's Apps from its root manifest's source path where the file left it out.
func (l *Layout) rootApps(f Files) error {
	for i := range l.Envs {
		e := &l.Envs[i]
		if e.Apps != "" || e.RootManifest == "" {
			continue
		}
		data, err := f.ReadFile(e.RootManifest)
		if err != nil {
			return fmt.Errorf("%s: env %s: rootManifest: %w", LayoutFile, e.Name, err)
		}
		root, err := RootApplication(data, e.Root)
		if err != nil {
			return fmt.Errorf("%s: %w", e.RootManifest, err)
		}
		if e.Apps, err = sourcePath(root); err != nil {
			return fmt.Errorf("%s: Application %s: %w", e.RootManifest, e.Root, err)
		}
	}
	return nil
}

// RootApplication is the Application called name ("": the first one) among the documents of a
// manifest file, as a JSON-compatible map.
func RootApplication(data []byte, name string) (map[string]any, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	for doc := 1; ; doc++ {
		var n yamlv3.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		var raw []byte
		if raw, err = yamlv3.Marshal(&n); err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		meta, _ := obj["metadata"].(map[string]any)
		if obj["kind"] == "Application" && (name == "" || meta["name"] == name) {
			return obj, nil
		}
	}
	if name != "" {
		return nil, fmt.Errorf("%w %s in the file", ErrNoApplication, name)
	}
	return nil, fmt.Errorf("%w in the file", ErrNoApplication)
}

// ErrNoApplication says a manifest file holds no (such) Application.
var ErrNoApplication = errors.New("no Application")

// sourcePath is the source path of an Application (its first source with a path).
func sourcePath(app map[string]any) (string, error) {
	spec, _ := app["spec"].(map[string]any)
	if src, ok := spec["source"].(map[string]any); ok {
		if p, _ := src["path"].(string); p != "" {
			return path.Clean(p), nil
		}
	}
	srcs, _ := spec["sources"].([]any)
	for _, s := range srcs {
		if src, ok := s.(map[string]any); ok {
			if p, _ := src["path"].(string); p != "" {
				return path.Clean(p), nil
			}
		}
	}
	return "", errors.New("the Application has no source path")
}

// Names are the envs' names, in the layout's order.
func (l *Layout) Names() []string {
	var out []string
	for _, e := range l.Envs {
		out = append(out, e.Name)
	}
	return out
}

// Env returns the env called name.
func (l *Layout) Env(name string) (Env, bool) {
	for _, e := range l.Envs {
		if e.Name == name {
			return e, true
		}
	}
	return Env{}, false
}

// Platform says whether this platform's own rules run (ProfileLLMPlatform).
func (l *Layout) Platform() bool { return l.Profile == ProfileLLMPlatform }

// Off returns the reason rule is off in env, "" when it runs there.
func (l *Layout) Off(rule, env string) string {
	for _, r := range l.Rules {
		if r.Name == rule && (len(r.Envs) == 0 || slices.Contains(r.Envs, env)) {
			return r.Reason
		}
	}
	return ""
}

// Describe says where the layout comes from, for messages: the file, or the convention.
func (l *Layout) Describe() string {
	if l.File != "" {
		return l.File
	}
	return "the directories under overlays/ (no " + LayoutFile + ")"
}
