package render

// Jsonnet files of a directory source, evaluated as Argo CD's repo-server evaluates them
// (argo-cd reposerver/repository makeJsonnetVM and confinedImporter) with the same go-jsonnet:
// the source's top-level arguments and external variables, imports searched beside the
// importing file, then in the library directories (the last first), then in the source path,
// and never outside the repository. Files are read through the Source's file system.

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/argoproj/argo-cd/v3/util/io/files"
	"github.com/google/go-jsonnet"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// evaluateJsonnet evaluates the n-th Jsonnet file (from 1) of the directory rel and returns its
// objects: the output is an object or an array of them (a null is skipped, a List is its items).
func (s Source) evaluateJsonnet(rel string, f manifestFile, opts JsonnetOptions, n int) ([]*unstructured.Unstructured, error) {
	vm := jsonnet.MakeVM()
	for _, v := range opts.TLAs {
		if v.Code {
			vm.TLACode(v.Name, opts.value(v, n))
		} else {
			vm.TLAVar(v.Name, opts.value(v, n))
		}
	}
	for _, v := range opts.ExtVars {
		if v.Code {
			vm.ExtCode(v.Name, opts.value(v, n))
		} else {
			vm.ExtVar(v.Name, opts.value(v, n))
		}
	}
	paths := []string{rel} // the source path first: searched last
	for _, lib := range opts.Libs {
		p, err := s.jsonnetLib(lib)
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	vm.Importer(&fsImporter{s: s, file: f.fsPath, paths: paths, read: map[string]jsonnet.Contents{}})
	out, err := vm.EvaluateFile(f.fsPath)
	if err != nil {
		return nil, fmt.Errorf("failed to evaluate jsonnet %q: %w", f.rel, err)
	}
	return jsonnetObjects(f.rel, []byte(out))
}

// jsonnetObjects decodes a Jsonnet file's output as Argo CD does: an array of objects, else one
// object; each needs a kind. Nulls are skipped, a List is its items, a List whose items are null
// nothing.
func jsonnetObjects(file string, out []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	if err := json.Unmarshal(out, &objs); err != nil {
		var one unstructured.Unstructured
		if err := json.Unmarshal(out, &one); err != nil {
			// Never the output itself in the message: it may be a Secret.
			return nil, fmt.Errorf("%s: the Jsonnet output is neither an object with a kind nor an array of them", file)
		}
		objs = []*unstructured.Unstructured{&one}
	}
	var flat []*unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o == nil:
		case o.IsList():
			err := o.EachListItem(func(item runtime.Object) error {
				flat = append(flat, item.(*unstructured.Unstructured))
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", file, o.GetKind(), err)
			}
		case nullList(o):
		default:
			flat = append(flat, o)
		}
	}
	return flat, nil
}

// nullList says whether o is a List whose items are null (IsList says no): nothing to apply.
func nullList(o *unstructured.Unstructured) bool {
	_, spec := o.Object["spec"]
	_, status := o.Object["status"]
	items, found := o.Object["items"]
	return !spec && !status && found && items == nil
}

// jsonnetLib is a library directory's path from the repository root: relative or absolute, it
// is from the root, and it must stay in the repository (on disk, once a symlink is followed).
func (s Source) jsonnetLib(lib string) (string, error) {
	rel := path.Clean(strings.TrimLeft(filepath.ToSlash(lib), "/"))
	if info, err := s.lstat(filepath.Join(s.root, rel)); err == nil && info.Mode()&fs.ModeSymlink != 0 {
		rel = s.repoRel(followLinks(filepath.Join(s.root, rel)))
	}
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("file '%s' resolved to outside repository root", lib)
	}
	return rel, nil
}

// followLinks follows a symlink at p, and the one it names, up to ten deep, as Argo CD resolves
// a library directory.
func followLinks(p string) string {
	for range 10 {
		target, err := os.Readlink(p)
		if err != nil {
			return p
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p = target
	}
	return p
}

// fsImporter finds and reads the files a Jsonnet file imports, in the Source.
type fsImporter struct {
	s Source
	// file is the file evaluated, in the Source's file system.
	file string
	// paths are the directories searched (from the repository root), the last first.
	paths []string
	// read are the files read, by their path in the Source's file system: an import of one file
	// is the same Contents every time, as go-jsonnet requires.
	read map[string]jsonnet.Contents
}

// Import implements jsonnet.Importer.
func (i *fsImporter) Import(importedFrom, importedPath string) (jsonnet.Contents, string, error) {
	found, err := i.locate(importedFrom, importedPath)
	if err != nil {
		return jsonnet.Contents{}, "", err
	}
	if c, ok := i.read[found]; ok {
		return c, found, nil
	}
	if err := i.validate(found, importedPath); err != nil {
		return jsonnet.Contents{}, "", err
	}
	data, err := i.s.fs.ReadFile(found)
	if err != nil {
		return jsonnet.Contents{}, "", fmt.Errorf("jsonnet import %q: %w", importedPath, err)
	}
	c := jsonnet.MakeContentsRaw(data)
	i.read[found] = c
	return c, found, nil
}

// locate finds an import: beside the importing file, then in each library directory from the
// last, then in the source path. An absolute path is the file evaluated (imported from nowhere)
// or else a path outside the repository (Argo CD's checkout is a directory of its own), as is
// a relative one that climbs out of it. Code given in a variable imports from nowhere: Argo CD
// looks in its own working directory first, never the repository, and so nothing is found there.
func (i *fsImporter) locate(importedFrom, importedPath string) (string, error) {
	if filepath.IsAbs(importedPath) {
		if importedFrom != "" || importedPath != i.file {
			return "", fmt.Errorf("jsonnet import %q resolves outside repository root", importedPath)
		}
		return importedPath, nil
	}
	var bases []string
	if importedFrom != "" {
		bases = append(bases, i.s.repoRel(filepath.Dir(importedFrom)))
	}
	for j := len(i.paths) - 1; j >= 0; j-- {
		bases = append(bases, i.paths[j])
	}
	for _, base := range bases {
		rel := path.Join(base, filepath.ToSlash(importedPath))
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return "", fmt.Errorf("jsonnet import %q resolves outside repository root", importedPath)
		}
		p := filepath.Join(i.s.root, filepath.FromSlash(rel))
		if _, err := i.s.lstat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("couldn't open import %q: no match locally or in the Jsonnet library paths", importedPath)
}

// validate refuses an import that is no regular file, or a symlink out of the repository.
func (i *fsImporter) validate(found, importedPath string) error {
	info, err := i.s.lstat(found)
	if err != nil {
		return fmt.Errorf("failed to stat jsonnet import %q: %w", importedPath, err)
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		root, err := filepath.EvalSymlinks(i.s.root)
		if err != nil {
			return err
		}
		real, inside, err := files.ResolveInbound(found, root)
		if err != nil {
			return fmt.Errorf("failed to resolve jsonnet import %q: %w", importedPath, err)
		}
		if !inside {
			return fmt.Errorf("jsonnet import %q resolves outside repository root", importedPath)
		}
		if info, err = os.Stat(real); err != nil {
			return fmt.Errorf("failed to stat jsonnet import %q: %w", importedPath, err)
		}
	}
	if info.IsDir() || !info.Mode().IsRegular() {
		return fmt.Errorf("jsonnet import %q is not a regular file", importedPath)
	}
	return nil
}
