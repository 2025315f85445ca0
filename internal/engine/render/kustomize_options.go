package render

// An Application's kustomize options other than patches, applied as Argo CD applies them: with
// `kustomize edit` commands on the kustomization file before the build (argo-cd util/kustomize
// Build), here the kustomize CLI's own edit commands run on a copy of that one file.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kustomize/v5/commands/edit"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// KustomizeOptions are an Application's spec.source.kustomize options besides its patches
// (Source.WithPatches), with Argo CD's build environment already substituted.
type KustomizeOptions struct {
	NamePrefix string `json:"namePrefix,omitempty"`
	NameSuffix string `json:"nameSuffix,omitempty"`
	// Images are `kustomize edit set image` arguments (name=newName:tag@digest, name:tag, ...).
	Images []string `json:"images,omitempty"`
	// Replicas are name → count.
	Replicas               []KustomizeReplica `json:"replicas,omitempty"`
	CommonLabels           map[string]string  `json:"commonLabels,omitempty"`
	ForceCommonLabels      bool               `json:"forceCommonLabels,omitempty"`
	LabelWithoutSelector   bool               `json:"labelWithoutSelector,omitempty"`
	LabelIncludeTemplates  bool               `json:"labelIncludeTemplates,omitempty"`
	CommonAnnotations      map[string]string  `json:"commonAnnotations,omitempty"`
	ForceCommonAnnotations bool               `json:"forceCommonAnnotations,omitempty"`
	Namespace              string             `json:"namespace,omitempty"`
	// Components are added to the kustomization (paths relative to it); a missing one is an
	// error unless IgnoreMissingComponents.
	Components              []string `json:"components,omitempty"`
	IgnoreMissingComponents bool     `json:"ignoreMissingComponents,omitempty"`
}

// KustomizeReplica is one `kustomize edit set replicas` entry.
type KustomizeReplica struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// Empty says whether the options change nothing.
func (k *KustomizeOptions) Empty() bool {
	return k == nil || len(k.edits()) == 0 && len(k.Components) == 0
}

func (k *KustomizeOptions) digest() string {
	if k == nil {
		return ""
	}
	data, _ := json.Marshal(k)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// edits are the `kustomize edit` invocations Argo CD runs for the options, in its order.
func (k *KustomizeOptions) edits() [][]string {
	var out [][]string
	if k.NamePrefix != "" {
		out = append(out, []string{"set", "nameprefix", "--", k.NamePrefix})
	}
	if k.NameSuffix != "" {
		out = append(out, []string{"set", "namesuffix", "--", k.NameSuffix})
	}
	if len(k.Images) > 0 {
		out = append(out, append([]string{"set", "image"}, k.Images...))
	}
	if len(k.Replicas) > 0 {
		args := []string{"set", "replicas"}
		for _, r := range k.Replicas {
			args = append(args, r.Name+"="+strconv.FormatInt(r.Count, 10))
		}
		out = append(out, args)
	}
	if len(k.CommonLabels) > 0 {
		args := []string{"add", "label"}
		if k.ForceCommonLabels {
			args = append(args, "--force")
		}
		if k.LabelWithoutSelector {
			args = append(args, "--without-selector")
		}
		if k.LabelIncludeTemplates {
			args = append(args, "--include-templates")
		}
		out = append(out, append(args, pairs(k.CommonLabels)...))
	}
	if len(k.CommonAnnotations) > 0 {
		args := []string{"add", "annotation"}
		if k.ForceCommonAnnotations {
			args = append(args, "--force")
		}
		out = append(out, append(args, pairs(k.CommonAnnotations)...))
	}
	if k.Namespace != "" {
		out = append(out, []string{"set", "namespace", "--", k.Namespace})
	}
	return out
}

func pairs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+":"+v)
	}
	sort.Strings(out)
	return out
}

// WithKustomize returns the Source as Argo CD renders target (an env or an AppTarget) with an
// Application's kustomize options: the kustomization file as the kustomize CLI's edit commands
// leave it. The repository is not changed; the Source reads the edited copy of that file.
func (s Source) WithKustomize(target string, k *KustomizeOptions) (Source, error) {
	if k.Empty() {
		return s, nil
	}
	dir := filepath.Join(s.root, TargetPath(target))
	name := ""
	for _, n := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if s.fs.Exists(filepath.Join(dir, n)) {
			name = n
			break
		}
	}
	if name == "" {
		return Source{}, fmt.Errorf("kustomize options of %s: no kustomization file in %s", target, TargetPath(target))
	}
	efs := &editFS{FileSystem: s.fs, dir: dir, written: map[string][]byte{}}
	pvd := provider.NewDefaultDepProvider()
	for _, args := range k.edits() {
		cmd := edit.NewCmdEdit(efs, pvd.GetFieldValidator(), pvd.GetResourceFactory(), io.Discard)
		var stderr bytes.Buffer
		cmd.SetArgs(args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(&stderr)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err != nil {
			return Source{}, fmt.Errorf("kustomize options of %s: kustomize edit %v: %w", target, args, err)
		}
	}
	file := filepath.Join(dir, name)
	data, err := efs.ReadFile(file)
	if err != nil {
		return Source{}, fmt.Errorf("kustomize options of %s: %w", target, err)
	}
	if len(k.Components) > 0 {
		if data, err = s.addComponents(target, dir, data, k); err != nil {
			return Source{}, err
		}
	}
	rel, _ := filepath.Rel(s.root, file)
	overrides := map[string][]byte{filepath.ToSlash(rel): data}
	for p, v := range s.overrides {
		if _, ok := overrides[p]; !ok {
			overrides[p] = v
		}
	}
	out := s
	out.fs = &overrideFS{FileSystem: s.fs, path: file, data: data}
	out.variant = joinVariant(s.variant, "k"+k.digest())
	out.overrides = overrides
	return out, nil
}

// addComponents adds the components to the kustomization as `kustomize edit add component`
// does (each once), after checking each has a kustomization as Argo CD does.
func (s Source) addComponents(target, dir string, data []byte, k *KustomizeOptions) ([]byte, error) {
	var m types.Kustomization
	if err := m.Unmarshal(data); err != nil {
		return nil, fmt.Errorf("kustomize options of %s: %w", target, err)
	}
	for _, c := range k.Components {
		found := false
		for _, n := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
			if s.fs.Exists(filepath.Join(dir, c, n)) {
				found = true
			}
		}
		switch {
		case !found && k.IgnoreMissingComponents:
			continue
		case !found:
			return nil, fmt.Errorf("kustomize options of %s: component %s has no kustomization", target, c)
		case !slices.Contains(m.Components, c):
			m.Components = append(m.Components, c)
		}
		if k.IgnoreMissingComponents {
			// Argo CD v3.6.1 adds only the first component it finds when missing ones are
			// ignored (its loop breaks out at the first match): so does the auditor.
			break
		}
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("kustomize options of %s: %w", target, err)
	}
	raw["components"] = m.Components
	out, err := yaml.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("kustomize options of %s: %w", target, err)
	}
	return out, nil
}

// editFS is the file system a `kustomize edit` command runs on: relative paths are from the
// kustomization's directory (the command's working directory), and writes stay in memory.
type editFS struct {
	filesys.FileSystem
	dir     string
	written map[string][]byte
}

func (e *editFS) abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(e.dir, p)
}

func (e *editFS) Exists(p string) bool {
	if _, ok := e.written[e.abs(p)]; ok {
		return true
	}
	return e.FileSystem.Exists(e.abs(p))
}

func (e *editFS) IsDir(p string) bool { return e.FileSystem.IsDir(e.abs(p)) }

func (e *editFS) ReadFile(p string) ([]byte, error) {
	if data, ok := e.written[e.abs(p)]; ok {
		return append([]byte(nil), data...), nil
	}
	return e.FileSystem.ReadFile(e.abs(p))
}

func (e *editFS) WriteFile(p string, data []byte) error {
	e.written[e.abs(p)] = append([]byte(nil), data...)
	return nil
}

func (e *editFS) ReadDir(p string) ([]string, error) { return e.FileSystem.ReadDir(e.abs(p)) }

func (e *editFS) Glob(pattern string) ([]string, error) { return e.FileSystem.Glob(e.abs(pattern)) }

func (e *editFS) Open(p string) (filesys.File, error) {
	if data, ok := e.written[e.abs(p)]; ok {
		mem := filesys.MakeFsInMemory()
		if err := mem.WriteFile(e.abs(p), data); err != nil {
			return nil, err
		}
		return mem.Open(e.abs(p))
	}
	return e.FileSystem.Open(e.abs(p))
}

func (e *editFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	return e.FileSystem.CleanedAbs(e.abs(p))
}

func (e *editFS) Walk(p string, fn filepath.WalkFunc) error { return e.FileSystem.Walk(e.abs(p), fn) }

func (e *editFS) Create(string) (filesys.File, error) {
	return nil, fmt.Errorf("kustomize edit: creating files: %w", os.ErrPermission)
}

func (e *editFS) Mkdir(string) error    { return fmt.Errorf("kustomize edit: %w", os.ErrPermission) }
func (e *editFS) MkdirAll(string) error { return fmt.Errorf("kustomize edit: %w", os.ErrPermission) }
func (e *editFS) RemoveAll(string) error {
	return fmt.Errorf("kustomize edit: %w", os.ErrPermission)
}
