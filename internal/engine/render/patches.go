package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Patch is one entry of an Argo CD Application's spec.source.kustomize.patches: a kustomize patch
// (patch or path, target, options) in its JSON form.
type Patch = map[string]any

// WithPatches returns the Source as Argo CD renders an Application whose kustomize options carry
// patches: it appends them to the patches of overlays/<env>/kustomization.yaml (or of an
// AppTarget's path) before building
// (argo-cd util/kustomize: the patches are added to the kustomization file, then kustomize
// builds). The repository is not changed: the Source reads a patched copy of that one file.
// Renders of a patched Source are cached apart from the plain one's.
func (s Source) WithPatches(env string, patches []Patch) (Source, error) {
	if len(patches) == 0 {
		return s, nil
	}
	// The kustomization file kustomize (and Argo CD) would read, under any of its names.
	dir := TargetPath(env)
	rel := filepath.Join(dir, "kustomization.yaml")
	for _, name := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if s.fs.Exists(filepath.Join(s.root, dir, name)) {
			rel = filepath.Join(dir, name)
			break
		}
	}
	file := filepath.Join(s.root, rel)
	data, err := s.fs.ReadFile(file)
	if err != nil {
		return Source{}, fmt.Errorf("kustomize patches of %s: %w", env, err)
	}
	var k map[string]any
	if err := yaml.Unmarshal(data, &k); err != nil {
		return Source{}, fmt.Errorf("%s: %w", rel, err)
	}
	list, _ := k["patches"].([]any)
	for _, p := range patches {
		list = append(list, p)
	}
	k["patches"] = list
	out, err := yaml.Marshal(k)
	if err != nil {
		return Source{}, fmt.Errorf("%s with the Application's patches: %w", rel, err)
	}
	variant, err := PatchesDigest(patches)
	if err != nil {
		return Source{}, err
	}
	variant = joinVariant(s.variant, variant)
	overrides := map[string][]byte{filepath.ToSlash(rel): out} // what a Worker applies over the files it is sent
	for k, v := range s.overrides {
		if _, ok := overrides[k]; !ok {
			overrides[k] = v
		}
	}
	return Source{fs: &overrideFS{FileSystem: s.fs, path: file, data: out}, root: s.root, revision: s.revision, variant: variant,
		files: s.files, dir: s.dir, overrides: overrides, omitted: s.omitted, helm: s.helm, dirOptions: s.dirOptions, valuesRoot: s.valuesRoot}, nil
}

// PatchesDigest identifies a list of patches (the cache keeps a patched render under its
// revision and this digest); "" for none.
func PatchesDigest(patches []Patch) (string, error) {
	if len(patches) == 0 {
		return "", nil
	}
	data, err := json.Marshal(patches)
	if err != nil {
		return "", fmt.Errorf("kustomize patches: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8]), nil
}

// Variant is how an Application's source options change the render of its path, applied in
// Argo CD's order: the kustomize edits, then the patches, then (for a chart) the helm options.
// Directory options make the path a directory source, whatever it holds.
type Variant struct {
	Kustomize *KustomizeOptions
	Patches   []Patch
	Helm      *HelmOptions
	Directory *DirectoryOptions
}

// WithVariant returns the Source rendering target with the variant's options.
func (s Source) WithVariant(target string, v Variant) (Source, error) {
	out, err := s.WithKustomize(target, v.Kustomize)
	if err != nil {
		return Source{}, err
	}
	if out, err = out.WithPatches(target, v.Patches); err != nil {
		return Source{}, err
	}
	return out.WithHelm(v.Helm).WithDirectory(v.Directory), nil
}

// CacheRevision is the key a render of revision with the variant's options is cached under:
// what a Source's WithVariant renders.
func CacheRevision(revision string, v Variant) (string, error) {
	d := ""
	if !v.Kustomize.Empty() {
		d = "k" + v.Kustomize.digest()
	}
	p, err := PatchesDigest(v.Patches)
	if err != nil {
		return revision, err
	}
	d = joinVariant(d, p)
	if v.Helm != nil {
		d = joinVariant(d, "h"+v.Helm.digest())
	}
	if v.Directory != nil {
		d = joinVariant(d, "d"+v.Directory.digest())
	}
	if d == "" || revision == "" {
		return revision, nil
	}
	return revision + "#" + d, nil
}

// cacheRevision is the key the Source's renders are cached under: its revision, with the digest
// of its patches when it has any.
func (s Source) cacheRevision() string {
	if s.variant == "" || s.revision == "" {
		return s.revision
	}
	return s.revision + "#" + s.variant
}

// overrideFS reads data for one file and passes everything else through.
type overrideFS struct {
	filesys.FileSystem
	path string
	data []byte
}

func (o *overrideFS) ReadFile(p string) ([]byte, error) {
	if filepath.Clean(p) == o.path {
		return append([]byte(nil), o.data...), nil
	}
	return o.FileSystem.ReadFile(p)
}

func (o *overrideFS) Open(p string) (filesys.File, error) {
	if filepath.Clean(p) == o.path {
		mem := filesys.MakeFsInMemory()
		if err := mem.WriteFile(o.path, o.data); err != nil {
			return nil, err
		}
		return mem.Open(o.path)
	}
	return o.FileSystem.Open(p)
}
