// Package render builds what Git says an environment should run, as Argo CD's repo-server does:
// Kustomize (krusty), Helm or a plain directory over an overlay or an Application's path, from a
// work tree on disk or a Git snapshot held in memory. Every render goes through a Renderer.
package render

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// Result is one rendered environment.
type Result struct {
	// Env is the environment name; Path the overlay directory rendered (e.g. overlays/prod).
	Env, Path string
	// Revision is the commit rendered, empty for a work tree.
	Revision string
	// Objects in Kustomize's output order.
	Objects []*unstructured.Unstructured
	// Raw holds the objects as JSON, in the same order, instead of Objects in a Result from
	// Cache.ByRevisionRaw or an Engine with Raw: shared with the cache, read only.
	Raw []json.RawMessage
	// YAML is the multi-document stream kustomize produced; nil in a Result a Cache answered.
	YAML []byte
	// Digest identifies YAML (its SHA-256, hex): two renders with the same Digest are the same.
	Digest string
}

// Source is a repository content to render from.
type Source struct {
	fs       filesys.FileSystem
	root     string
	revision string
	// variant is the digest of the Application patches the Source renders with (WithPatches).
	variant string
	// files are a snapshot's contents (nil for a work tree): what a Worker is sent.
	files map[string][]byte
	// dir is a work tree's directory ("" for a snapshot).
	dir string
	// overrides are files WithPatches replaced (path from root → content), sent to a Worker too.
	overrides map[string][]byte
	// omitted are a snapshot's files too large to read (gitrepo.Snapshot.Omitted), by size.
	omitted map[string]int64
	// symlinks are the paths a snapshot's commit records as symlinks (gitrepo.Snapshot.Symlinks),
	// which it does not hold: a directory render that would read one refuses (directory_files.go).
	symlinks map[string]bool
	// helm are the Application's helm options a chart is rendered with (WithHelm).
	helm *HelmOptions
	// dirOptions are the Application's directory options (WithDirectory): with them the path
	// is rendered as a directory.
	dirOptions *DirectoryOptions
	// valuesRoot is where an absolute value file path starts ("": the repository's root; a
	// fetched chart's own directory for FromChart, as Argo CD resolves it there).
	valuesRoot string
}

// FromDir renders from a work tree on disk rooted at dir.
func FromDir(dir string) (Source, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Source{}, fmt.Errorf("repository directory %s: %w", dir, err)
	}
	return Source{fs: filesys.MakeFsOnDisk(), root: abs, dir: abs}, nil
}

// FromSnapshot renders from a Git snapshot, in memory: no checkout, no temporary files.
func FromSnapshot(s *gitrepo.Snapshot) (Source, error) {
	src, err := fromFiles(s.Files, s.Omitted, s.Revision)
	src.symlinks = s.Symlinks
	return src, err
}

// fromFiles is a Source over files (slash-separated paths) held in memory. The omitted ones
// exist, but reading one is an error that names it.
func fromFiles(files map[string][]byte, omitted map[string]int64, revision string) (Source, error) {
	mem := filesys.MakeFsInMemory()
	for name, data := range files {
		if err := mem.WriteFile("/"+name, data); err != nil {
			return Source{}, fmt.Errorf("load %s: %w", name, err)
		}
	}
	var fs filesys.FileSystem = mem
	if len(omitted) > 0 {
		for name := range omitted {
			if err := mem.WriteFile("/"+name, nil); err != nil {
				return Source{}, fmt.Errorf("load %s: %w", name, err)
			}
		}
		fs = &omittedFS{FileSystem: mem, omitted: omitted}
	}
	return Source{fs: fs, root: "/", revision: revision, files: files, omitted: omitted}, nil
}

// omittedFS refuses to read the files a snapshot left out for their size.
type omittedFS struct {
	filesys.FileSystem
	omitted map[string]int64
}

func (o *omittedFS) check(p string) error {
	name := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/")
	if size, ok := o.omitted[name]; ok {
		return fmt.Errorf("%s is %d bytes, larger than the %d a snapshot reads: not a manifest", name, size, gitrepo.MaxFileSize)
	}
	return nil
}

func (o *omittedFS) ReadFile(p string) ([]byte, error) {
	if err := o.check(p); err != nil {
		return nil, err
	}
	return o.FileSystem.ReadFile(p)
}

func (o *omittedFS) Open(p string) (filesys.File, error) {
	if err := o.check(p); err != nil {
		return nil, err
	}
	return o.FileSystem.Open(p)
}

// AtRevision renders from the repository's tree at rev (a snapshot read into memory).
func AtRevision(repo *gitrepo.Repo, rev string) (Source, error) {
	snap, err := repo.Snapshot(rev)
	if err != nil {
		return Source{}, err
	}
	return FromSnapshot(snap)
}

// Has reports whether the repository holds a file (slash-separated path).
func (s Source) Has(rel string) bool { return s.fs.Exists(filepath.Join(s.root, rel)) }

// ReadFile reads a file of the repository (slash-separated path from its root); an absent file
// is an error wrapping fs.ErrNotExist, a path leaving the repository an error.
func (s Source) ReadFile(rel string) ([]byte, error) {
	clean := path.Clean(rel)
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return nil, fmt.Errorf("%s leaves the repository", rel)
	}
	p := filepath.Join(s.root, filepath.FromSlash(clean))
	if !s.fs.Exists(p) || s.fs.IsDir(p) {
		return nil, fmt.Errorf("%s: %w", clean, fs.ErrNotExist)
	}
	return s.fs.ReadFile(p)
}

// Revision is the commit the source was read from ("" for a work tree).
func (s Source) Revision() string { return s.revision }

// OverlayPath is where an environment's overlay lives in the repository.
func OverlayPath(env string) string { return path.Join("overlays", env) }

// ReadDir lists a directory of the repository (slash-separated path from its root): the names
// of its entries; an absent directory is an error wrapping fs.ErrNotExist.
func (s Source) ReadDir(rel string) ([]string, error) {
	clean := path.Clean(rel)
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return nil, fmt.Errorf("%s leaves the repository", rel)
	}
	p := filepath.Join(s.root, filepath.FromSlash(clean))
	if !s.fs.IsDir(p) {
		return nil, fmt.Errorf("%s: %w", clean, fs.ErrNotExist)
	}
	return s.fs.ReadDir(p)
}

// Envs lists the environments: the directories under overlays/ holding a kustomization.
func (s Source) Envs() ([]string, error) {
	dir := filepath.Join(s.root, "overlays")
	entries, err := s.fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list overlays: %w", err)
	}
	var envs []string
	for _, e := range entries {
		if s.fs.Exists(filepath.Join(dir, e, "kustomization.yaml")) {
			envs = append(envs, e)
		}
	}
	sort.Strings(envs)
	return envs, nil
}

// AppTarget names the render of an Application's source path (rel, from the repository root)
// wherever a function of this package takes an env: a Target, WithPatches, the Cache and the
// Worker treat it like an env's overlay. A path with a kustomization is built by kustomize, one
// with a Chart.yaml by Helm; any other is a plain directory, read as Argo CD reads it.
func AppTarget(rel string) string { return "@" + path.Clean(strings.TrimPrefix(rel, "./")) }

// TargetPath is the repository path a render target (an env or an AppTarget) reads.
func TargetPath(target string) string {
	if rel, ok := strings.CutPrefix(target, "@"); ok {
		return rel
	}
	return OverlayPath(target)
}

// build renders overlays/<env> with kustomize, or the path of an AppTarget as Argo CD tells its
// type (renderAppPath).
func (s Source) build(env string) (*Result, error) {
	if rel, ok := strings.CutPrefix(env, "@"); ok {
		res, err := s.renderAppPath(rel)
		if err != nil {
			return nil, err
		}
		res.Env = env
		return res, nil
	}
	if env == "" || strings.ContainsAny(env, `/\`) || env == "." || env == ".." {
		return nil, fmt.Errorf("invalid environment name %q", env)
	}
	rel := OverlayPath(env)
	if !s.fs.Exists(filepath.Join(s.root, rel, "kustomization.yaml")) {
		envs, _ := s.Envs()
		return nil, fmt.Errorf("render %s: no %s/kustomization.yaml (environments: %s)", env, rel, strings.Join(envs, ", "))
	}
	res, err := s.kustomize(rel)
	if err != nil {
		return nil, err
	}
	res.Env = env
	return res, nil
}

// kustomize runs kustomize over a kustomization directory of the repository (e.g. apps/prod).
func (s Source) kustomize(rel string) (*Result, error) {
	dir := filepath.Join(s.root, rel)
	opts := krusty.MakeDefaultOptions()
	m, err := krusty.MakeKustomizer(opts).Run(s.fs, dir)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", rel, s.explain(err, rel))
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", rel, err)
	}
	sum := sha256.Sum256(out)
	res := &Result{Path: rel, Revision: s.revision, YAML: out, Digest: hex.EncodeToString(sum[:])}
	for _, r := range m.Resources() {
		// Through JSON so numbers become int64, as the rest of client-go expects.
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("render %s: %s: %w", rel, r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("render %s: %s: %w", rel, r.CurId(), err)
		}
		res.Objects = append(res.Objects, u)
	}
	return res, nil
}

// explain improves kustomize's error for the commonest mistake, malformed YAML, whose message does
// not always say which file: the repository's YAML files are parsed to find the file and line.
func (s Source) explain(err error, overlay string) error {
	if perr := s.findYAMLError(overlay); perr != nil {
		return fmt.Errorf("%w (kustomize: %v)", perr, err)
	}
	return err
}

// YAMLError is a file that does not parse as YAML.
type YAMLError struct {
	File string
	Line int
	Msg  string
}

func (e *YAMLError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// findYAMLError returns the first YAML file under base/, components/ or the overlay that fails to parse.
func (s Source) findYAMLError(overlay string) error {
	var found error
	for _, top := range []string{overlay, "base", "components"} {
		_ = s.fs.Walk(filepath.Join(s.root, top), func(p string, info os.FileInfo, err error) error {
			if err != nil || found != nil || info.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
				return nil
			}
			data, rerr := s.fs.ReadFile(p)
			if rerr != nil {
				return nil
			}
			rel, _ := filepath.Rel(s.root, p)
			found = checkYAML(filepath.ToSlash(rel), data)
			return nil
		})
	}
	return found
}

// checkYAML parses every document of a file, returning a *YAMLError with the parser's line.
func checkYAML(name string, data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return problemLine(yamlError(name, err), data)
		}
	}
}

// parserProblems are the libyaml parser's problems (parserc.go), as opposed to its scanner's.
// For these yaml.v3 reports the line where the enclosing block starts; yaml.v2, the same
// parser's port, reports the problem's own line, counted from 0.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// problemLine moves a parser error e to the line of the problem itself: for a bad indent deep in
// a patch, the bad line, not the patch's first. A scanner error keeps yaml.v3's line.
func problemLine(e *YAMLError, data []byte) *YAMLError {
	if !parserProblems[e.Msg] {
		return e
	}
	dec := yamlv2.NewDecoder(bytes.NewReader(data))
	for {
		var v any
		err := dec.Decode(&v)
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			return e
		}
		p := yamlError(e.File, err)
		if p.Line == 0 || p.Msg != e.Msg {
			return e // not the same problem: keep what yaml.v3 said
		}
		p.Line++
		return p
	}
}

// yamlError extracts "line N" from a yaml.v3 error message.
func yamlError(name string, err error) *YAMLError {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	ye := &YAMLError{File: name, Msg: msg}
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		var line int
		if _, serr := fmt.Sscanf(rest, "%d:", &line); serr == nil {
			ye.Line = line
			ye.Msg = strings.TrimSpace(rest[strings.Index(rest, ":")+1:])
		}
	}
	return ye
}
