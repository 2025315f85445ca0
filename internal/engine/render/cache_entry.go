package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/atomicfile"
)

// An entry of the Cache: one render with what it read, kept in memory and on disk (its key and
// format), checked against a Source and decoded into a Result.

// cacheEntry is one render and what it read.
type cacheEntry struct {
	Env       string `json:"env"`
	Kustomize string `json:"kustomize"`
	// Revisions are the commits known to render to this (a hit by revision skips the checks).
	Revisions []string `json:"revisions"`
	// Probes maps "kind:path" (path relative to the repository root) to what it found.
	Probes  map[string]string `json:"probes"`
	Path    string            `json:"path"`
	Objects []json.RawMessage `json:"objects"`
	Digest  string            `json:"digest"`

	shared     sync.Once
	sharedObjs []*unstructured.Unstructured
	sharedOK   bool
}

// cacheFormat changes whenever cacheEntry or the render options do.
const cacheFormat = "v3"

// raw returns e's render for revision with its objects as JSON.
func (e *cacheEntry) raw(revision string) *Result {
	return &Result{Env: e.Env, Path: e.Path, Revision: revision, Digest: e.Digest, Raw: slices.Clip(e.Objects)}
}

func (c *Cache) key(env string) string {
	sum := sha256.Sum256([]byte(cacheFormat + "\x00" + KustomizeVersion + "\x00" + env))
	return hex.EncodeToString(sum[:12])
}

// load returns env's entries, reading the disk the first time.
func (c *Cache) load(env string) []*cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	es, ok := c.entries[env]
	if !ok && c.dir != "" {
		data, err := os.ReadFile(filepath.Join(c.dir, c.key(env)+".json"))
		if err == nil && (json.Unmarshal(data, &es) != nil || !decodable(es)) {
			es = nil // a corrupt or older file is a miss, and is rewritten
		}
		c.entries[env] = es
	}
	return append([]*cacheEntry(nil), es...)
}

// decodable says whether every object of es is what decoding it needs (checkObject): a cache
// answers with JSON (ByRevisionRaw) that its caller decodes later, so an entry that would not
// decode must be a miss, re-rendered, not an answer that fails every audit of its revisions.
func decodable(es []*cacheEntry) bool {
	for _, e := range es {
		if e == nil {
			return false
		}
		for _, o := range e.Objects {
			if checkObject(o) != nil {
				return false
			}
		}
	}
	return true
}

// store keeps r, a render of key: its objects as the child sent them, or encoded one by one. It
// says whether it did (an object that cannot be encoded is not kept).
func (c *Cache) store(r *recordedRender, key string) bool {
	res := r.res
	e := &cacheEntry{Env: res.Env, Kustomize: KustomizeVersion, Probes: r.probes, Path: res.Path, Digest: res.Digest, Objects: r.raw}
	if key != "" {
		e.Revisions = []string{key}
	}
	if r.raw == nil {
		for _, o := range res.Objects {
			data, err := o.MarshalJSON()
			if err != nil {
				return false // not cacheable; the render itself is fine
			}
			e.Objects = append(e.Objects, data)
		}
		if c.Shared { // the render just made is the one hits share: never decoded a second time
			e.shared.Do(func() { e.sharedObjs, e.sharedOK = res.Objects, true })
		}
	}
	c.mu.Lock()
	es := append([]*cacheEntry{e}, c.entries[res.Env]...)
	if len(es) > c.max {
		es = es[:c.max]
	}
	c.entries[res.Env] = es
	c.mu.Unlock()
	c.save(res.Env)
	return true
}

func (c *Cache) addRevision(e *cacheEntry, revision string) {
	if revision == "" {
		return
	}
	c.mu.Lock()
	e.Revisions = append(e.Revisions, revision)
	if len(e.Revisions) > 64 {
		e.Revisions = e.Revisions[len(e.Revisions)-64:]
	}
	c.mu.Unlock()
	c.save(e.Env)
}

// save writes env's entries to disk (atomically); a cache that cannot be written is only slower.
func (c *Cache) save(env string) {
	if c.dir == "" {
		return
	}
	c.mu.Lock()
	data, err := json.Marshal(c.entries[env])
	c.mu.Unlock()
	if err != nil || os.MkdirAll(c.dir, 0o700) != nil {
		return
	}
	_ = atomicfile.Write(filepath.Join(c.dir, c.key(env)+".json"), data)
}

// matches reports whether every read the render made finds the same in s.
func (e *cacheEntry) matches(s Source) bool {
	if e.Kustomize != KustomizeVersion || len(e.Probes) == 0 {
		return false
	}
	directory := false
	for k, want := range e.Probes {
		kind, rel, _ := strings.Cut(k, ":")
		switch kind {
		case probeHelm:
			if s.helm.digest() != want {
				return false
			}
			continue
		case probeDirectory:
			if directory = true; s.dirOptions.digest() != want {
				return false
			}
			continue
		}
		p := rel
		if !filepath.IsAbs(rel) {
			p = filepath.Join(s.root, rel)
		}
		if probe(s.fs, kind, p) != want {
			return false
		}
	}
	// A render of kustomize or helm is no render of a source whose directory options make it
	// a directory.
	return directory || s.dirOptions == nil
}

// resultFor returns e's render for revision: decoded once and shared when the cache is Shared,
// else a fresh copy.
func (c *Cache) resultFor(e *cacheEntry, revision string) (*Result, bool) {
	if !c.Shared {
		return e.result(revision)
	}
	e.shared.Do(func() {
		if res, ok := e.result(""); ok {
			e.sharedObjs, e.sharedOK = res.Objects, true
		}
	})
	return &Result{Env: e.Env, Path: e.Path, Revision: revision, Digest: e.Digest, Objects: e.sharedObjs}, e.sharedOK
}

// result decodes a fresh copy of the render (callers may change their objects).
func (e *cacheEntry) result(revision string) (*Result, bool) {
	res := &Result{Env: e.Env, Path: e.Path, Revision: revision, Digest: e.Digest, Objects: make([]*unstructured.Unstructured, 0, len(e.Objects))}
	for _, data := range e.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, false
		}
		res.Objects = append(res.Objects, u)
	}
	return res, true
}
