package render

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
)

// Cache keeps rendered environments by the content of what each render read, the way Argo CD's
// repo-server caches manifests per revision: a render records every file, directory listing and
// existence check kustomize made, with what it found; a later render of the same env is answered
// from the cache when every one of those still finds the same (at any revision: a commit that
// touches only docs/ or another env reuses the render). The kustomize module version is part of
// the key. Entries live in memory, and on disk too when the cache has a directory (the CLI's).
// An entry keeps each object as JSON (a decoded render takes about five times as much) and the
// YAML stream's digest, not the stream: a hit's Result has no YAML.
type Cache struct {
	dir string
	max int
	// Shared makes hits return one decoded render per entry instead of a fresh copy: callers
	// must not change its objects. It saves decoding every object again at every hit, and keeps
	// the decoded objects as long as the entry: for short-lived caches (a blame walk).
	Shared bool
	// Worker, when set, runs the renders the cache cannot answer in a child process (Worker):
	// kustomize's working set then never enters this process' heap. Hits are unchanged.
	Worker *Worker
	// Urgent puts the cache's renders before the other caches' waiting for the Worker (the
	// audits' cache: an audit waits behind no blame walk or ledger sync).
	Urgent bool

	mu      sync.Mutex
	entries map[string][]*cacheEntry // env → newest first
	stats   CacheStats
}

// CacheStats counts how renders were answered.
type CacheStats struct {
	// ByRevision: the commit was known; ByContent: another commit's render read the same;
	// Rendered: kustomize ran; InWorker: of those, in the Worker's child process.
	ByRevision, ByContent, Rendered, InWorker int
}

// Stats returns the counts so far.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

func (c *Cache) count(f func(*CacheStats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// NewCache returns a cache keeping up to perEnv renders of each env in memory, and on disk under
// dir when dir is not empty.
func NewCache(dir string, perEnv int) *Cache {
	if perEnv < 1 {
		perEnv = 1
	}
	return &Cache{dir: dir, max: perEnv, entries: map[string][]*cacheEntry{}}
}

// KustomizeVersion is the version of the kustomize module rendering here.
var KustomizeVersion = func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "sigs.k8s.io/kustomize/api" {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "unknown"
}()

// ByRevision returns the render of env at a commit if the cache knows that commit; revision is
// the commit, or CacheRevision's key for a render with an Application's patches.
func (c *Cache) ByRevision(env, revision string) (*Result, bool) {
	e := c.byRevision(env, revision)
	if e == nil {
		return nil, false
	}
	return c.resultFor(e, commitOf(revision))
}

// ByRevisionRaw is ByRevision giving the render's objects as JSON (Result.Raw, shared with the
// cache: read only) instead of decoded: a caller that needs one object at a time never holds
// the whole render decoded.
func (c *Cache) ByRevisionRaw(env, revision string) (*Result, bool) {
	e := c.byRevision(env, revision)
	if e == nil {
		return nil, false
	}
	return e.raw(commitOf(revision)), true
}

// byRevision returns the entry of env known to render revision, counting the hit; nil when
// there is none.
func (c *Cache) byRevision(env, revision string) *cacheEntry {
	e := c.entryFor(env, revision)
	if e != nil {
		c.count(func(s *CacheStats) { s.ByRevision++ })
	}
	return e
}

// commitOf is the commit of a cache revision (a patched render's key: CacheRevision).
func commitOf(revision string) string {
	commit, _, _ := strings.Cut(revision, "#")
	return commit
}

// Knows says whether the cache holds env's render at revision (a commit or CacheRevision's key),
// without decoding it.
func (c *Cache) Knows(env, revision string) bool { return c.entryFor(env, revision) != nil }

// entryFor returns the entry of env known to render revision, or nil.
func (c *Cache) entryFor(env, revision string) *cacheEntry {
	if c == nil || revision == "" {
		return nil
	}
	for _, e := range c.load(env) {
		c.mu.Lock() // addRevision appends to it
		known := slices.Contains(e.Revisions, revision)
		c.mu.Unlock()
		if known {
			return e
		}
	}
	return nil
}

// renderCached renders env from s through the cache: a render whose recorded reads all find the
// same content in s is reused; otherwise kustomize runs (stopped when ctx is cancelled, in the
// Worker's child process when the cache has one) and its reads are recorded.
func (s Source) renderCached(ctx context.Context, env string, c *Cache) (*Result, error) {
	if e := c.cached(s, env); e != nil {
		if res, ok := c.resultFor(e, s.revision); ok {
			return res, nil
		}
	}
	r, _, err := c.renderAndKeep(ctx, s, env)
	if err != nil {
		return nil, err
	}
	return r.result()
}

// renderRaw renders env from s into the cache unless the cache can answer it already, and
// returns the cache's entry as JSON (Result.Raw): a render done by the cache's Worker is never
// decoded whole here. A render the cache does not keep (its kustomization reads a remote) is
// returned decoded. s has a revision.
func (s Source) renderRaw(ctx context.Context, env string, c *Cache) (*Result, error) {
	if e := c.cached(s, env); e != nil {
		return e.raw(s.revision), nil
	}
	r, kept, err := c.renderAndKeep(ctx, s, env)
	if err != nil {
		return nil, err
	}
	if !kept {
		return r.result()
	}
	if e := c.entryFor(env, s.cacheRevision()); e != nil {
		return e.raw(s.revision), nil
	}
	return nil, fmt.Errorf("%s at %.12s: the render cache did not keep the render it was given", TargetPath(env), s.revision)
}

// renderAndKeep runs kustomize for env from s and keeps the render unless it read a remote (or
// cannot be encoded): kept says which.
func (c *Cache) renderAndKeep(ctx context.Context, s Source, env string) (r *recordedRender, kept bool, err error) {
	r, err = c.render(ctx, s, env)
	if err != nil {
		return nil, false, err
	}
	c.count(func(st *CacheStats) {
		st.Rendered++
		if r.worker {
			st.InWorker++
		}
	})
	if !r.remote {
		kept = c.store(r, s.cacheRevision())
	}
	return r, kept, nil
}

// Cached returns t's render from s when e's Cache can answer it without rendering: it knows
// the commit, or a render of another commit read the same content. As JSON with Raw.
func (e Engine) Cached(s Source, t Target) (*Result, bool) {
	if e.Cache == nil {
		return nil, false
	}
	s, err := s.WithVariant(t.Name, t.Variant)
	if err != nil {
		return nil, false // the render says why
	}
	entry := e.Cache.cached(s, t.Name)
	if entry == nil {
		return nil, false
	}
	if e.Raw {
		return entry.raw(s.revision), true
	}
	return e.Cache.resultFor(entry, s.revision)
}

// cached returns the entry of env's render from s: the one known to render s's revision, else
// one whose recorded reads all find the same content in s (s's revision is then recorded on it).
// Every entry decodes (checked when read from a worker or from disk), so an answer is one.
func (c *Cache) cached(s Source, env string) *cacheEntry {
	if c == nil {
		return nil
	}
	key := s.cacheRevision()
	if e := c.byRevision(env, key); e != nil {
		return e
	}
	for _, e := range c.load(env) {
		if e.matches(s) {
			c.addRevision(e, key)
			c.count(func(s *CacheStats) { s.ByContent++ })
			return e
		}
	}
	return nil
}

// render runs kustomize, in the Worker's child process when the cache has one, recording what
// the render read.
func (c *Cache) render(ctx context.Context, s Source, env string) (*recordedRender, error) {
	if c.Worker != nil && (s.files != nil || s.dir != "") {
		return c.Worker.render(ctx, s, env, c.Urgent)
	}
	rec := &recordingFS{FileSystem: s.fs, root: s.root, probes: map[string]string{}}
	res, err := Source{fs: rec, root: s.root, revision: s.revision, variant: s.variant, helm: s.helm, dirOptions: s.dirOptions}.build(env)
	if err != nil {
		return nil, err
	}
	return &recordedRender{res: res, probes: rec.recorded(), remote: rec.remote}, nil
}
