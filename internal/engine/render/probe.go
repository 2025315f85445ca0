package render

// What a render read, recorded so that a later render can be answered from the cache when every
// read still finds the same.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Probe kinds: what a read found.
const (
	probeStat = "stat" // absent, file or dir
	probeRead = "read" // the file's content hash, or absent
	probeList = "list" // a directory's entries
	probeTree = "tree" // every file below a directory, with content (Walk)
	probeGlob = "glob" // a pattern's matches
	probeHelm = "helm" // the helm options a chart was rendered with (not a read: the Source's)
	// probeDirectory: the directory options a directory was read with ("" for none; not a read).
	probeDirectory = "directory"
)

// probe computes what a read of kind at p finds in fs.
func probe(fs filesys.FileSystem, kind, p string) string {
	switch kind {
	case probeStat:
		switch {
		case !fs.Exists(p):
			return "absent"
		case fs.IsDir(p):
			return "dir"
		default:
			return "file"
		}
	case probeRead:
		if fs.IsDir(p) {
			return "dir"
		}
		data, err := fs.ReadFile(p)
		if err != nil {
			return "absent"
		}
		sum := sha256.Sum256(data)
		return hex.EncodeToString(sum[:])
	case probeList:
		names, err := fs.ReadDir(p)
		if err != nil {
			return "absent"
		}
		sort.Strings(names)
		return digest(names)
	case probeTree:
		var parts []string
		err := fs.Walk(p, func(q string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if info.IsDir() {
				parts = append(parts, q+"/")
				return nil
			}
			parts = append(parts, q+"="+probe(fs, probeRead, q))
			return nil
		})
		if err != nil {
			return "absent"
		}
		return digest(parts)
	case probeGlob:
		m, err := fs.Glob(p)
		if err != nil {
			return "error"
		}
		sort.Strings(m)
		return digest(m)
	}
	return fmt.Sprintf("unknown probe %q", kind)
}

func digest(parts []string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// recordingFS passes kustomize's reads through and records each with what it found.
type recordingFS struct {
	filesys.FileSystem
	root   string
	mu     sync.Mutex
	probes map[string]string
	// remote: a kustomization read may reach outside the repository (a URL or Git remote in
	// resources, components, openapi, crds; a Helm chart): what it fetches leaves no probe, so
	// the render is not cached.
	remote bool
}

// remoteRef matches what makes kustomize read outside the filesystem: a URL, a Git remote in
// any of the spellings kustomize accepts (git@host:org/repo, github.com:org/repo, github.com/...),
// in any case.
var remoteRef = regexp.MustCompile(`(?i)://|[a-z0-9._-]+@[a-z0-9.-]+:|(github\.com|gitlab\.com|bitbucket\.org)[:/]`)

// kustomizationFile reports whether a path is one kustomize reads as a kustomization.
func kustomizationFile(p string) bool {
	switch filepath.Base(p) {
	case "kustomization.yaml", "kustomization.yml", "Kustomization":
		return true
	}
	return false
}

func (r *recordingFS) note(kind, p string) {
	rel, err := filepath.Rel(r.root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = p // outside the repository: kept absolute, still checked
	}
	v := probe(r.FileSystem, kind, p)
	r.mu.Lock()
	r.probes[kind+":"+filepath.ToSlash(rel)] = v
	r.mu.Unlock()
}

// noteHelm records the helm options a chart at p was rendered with.
func (r *recordingFS) noteHelm(p string, h *HelmOptions) {
	r.mu.Lock()
	r.probes[probeHelm+":"+filepath.ToSlash(p)] = h.digest()
	r.mu.Unlock()
}

// noteDirectory records the directory options a directory at p was read with.
func (r *recordingFS) noteDirectory(p string, d *DirectoryOptions) {
	r.mu.Lock()
	r.probes[probeDirectory+":"+filepath.ToSlash(p)] = d.digest()
	r.mu.Unlock()
}

func (r *recordingFS) recorded() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.probes
}

func (r *recordingFS) Open(p string) (filesys.File, error) {
	r.note(probeRead, p)
	return r.FileSystem.Open(p)
}

func (r *recordingFS) ReadFile(p string) ([]byte, error) {
	r.note(probeRead, p)
	data, err := r.FileSystem.ReadFile(p)
	if err == nil && (kustomizationFile(p) && readsRemote(data) || builtinConfig(data) && remoteRef.Match(withoutCommentLines(data))) {
		r.mu.Lock()
		r.remote = true
		r.mu.Unlock()
	}
	return data, err
}

// loadedFields are the kustomization fields whose values kustomize loads: a file or directory,
// or a URL or Git remote (its loader fetches those). Everything else is inline (patches' bodies,
// literals, labels and annotations, image names, selectors) and fetches nothing.
var loadedFields = []string{"resources", "bases", "components", "crds", "configurations", "generators",
	"transformers", "validators", "openapi", "replacements", "patches", "patchesJson6902", "patchesStrategicMerge",
	"configMapGenerator", "secretGenerator", "helmCharts", "helmGlobals"}

// readsRemote says whether a kustomization may make kustomize read outside the repository: a URL
// or Git remote where kustomize loads something, or a Helm chart. Inline content — a patch setting
// an env var to s3://models/..., an image on registry.gitlab.com — fetches nothing. A file that
// does not parse is looked at whole (but its comment lines), conservatively.
func readsRemote(data []byte) bool {
	var k map[string]any
	if err := yaml.Unmarshal(data, &k); err != nil {
		return remoteRef.Match(withoutCommentLines(data))
	}
	if k["helmCharts"] != nil || k["helmGlobals"] != nil {
		return true
	}
	loaded := map[string]any{}
	for _, f := range loadedFields {
		if v, ok := k[f]; ok {
			loaded[f] = v
		}
	}
	for _, f := range []string{"patches", "patchesJson6902"} { // only their paths are loaded
		var paths []any
		for _, p := range asList(k[f]) {
			if m, ok := p.(map[string]any); ok {
				paths = append(paths, m["path"])
			}
		}
		loaded[f] = paths
	}
	if psm := asList(k["patchesStrategicMerge"]); psm != nil {
		loaded["patchesStrategicMerge"] = slices.DeleteFunc(slices.Clone(psm), func(p any) bool {
			s, ok := p.(string)
			return ok && (strings.Contains(s, "\n") || strings.HasPrefix(strings.TrimSpace(s), "{"))
		})
	}
	for _, f := range []string{"configMapGenerator", "secretGenerator"} { // their files are loaded
		var files []any
		for _, g := range asList(k[f]) {
			if m, ok := g.(map[string]any); ok {
				files = append(files, m["files"], m["envs"], m["env"])
			}
		}
		loaded[f] = files
	}
	rest, err := json.Marshal(loaded)
	return err != nil || remoteRef.Match(rest)
}

// builtinConfig says whether data may hold a builtin generator's or transformer's config
// (apiVersion: builtin), which a kustomization lists under generators or transformers and whose
// files kustomize loads: in any document of the file, a List's item, JSON or YAML. Such a file is
// looked at whole (but its comment lines), conservatively.
func builtinConfig(data []byte) bool {
	return bytes.Contains(data, []byte("builtin"))
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// withoutCommentLines drops the lines that are only a YAML comment: a URL there ("filled from
// s3://models/...") fetches nothing. A comment after a value is kept: the check stays conservative.
func withoutCommentLines(data []byte) []byte {
	if !bytes.Contains(data, []byte("#")) {
		return data
	}
	var out []byte
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimLeft(line, " \t"), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

func (r *recordingFS) Exists(p string) bool {
	r.note(probeStat, p)
	return r.FileSystem.Exists(p)
}

func (r *recordingFS) IsDir(p string) bool {
	r.note(probeStat, p)
	return r.FileSystem.IsDir(p)
}

func (r *recordingFS) ReadDir(p string) ([]string, error) {
	r.note(probeList, p)
	return r.FileSystem.ReadDir(p)
}

func (r *recordingFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	r.note(probeStat, p)
	return r.FileSystem.CleanedAbs(p)
}

func (r *recordingFS) Glob(pattern string) ([]string, error) {
	r.note(probeGlob, pattern)
	return r.FileSystem.Glob(pattern)
}

func (r *recordingFS) Walk(p string, fn filepath.WalkFunc) error {
	r.note(probeTree, p)
	return r.FileSystem.Walk(p, fn)
}
