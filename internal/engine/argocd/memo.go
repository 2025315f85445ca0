package argocd

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/engine/atomicfile"
)

// Memo remembers which objects Argo CD's diff found in sync, by everything the verdict is a
// function of: Git's object (its content), the live object (UID and resourceVersion: any write
// changes it), the Application's ignoreDifferences, argocd-cm's overrides and the argo-cd module
// version. A remembered pair skips the diff; a live object written since, a new render or new
// settings miss. Only in-sync verdicts are kept — they carry no values, so nothing of a Secret
// reaches the disk — and only those of the last run, so it holds at most one entry per object.
type Memo struct {
	path string

	mu         sync.Mutex
	prev, next map[string]bool
}

// NewMemo returns a memo kept in memory, and in the file at path too when path is not empty
// (a missing or unreadable file starts it empty).
func NewMemo(path string) *Memo {
	m := &Memo{path: path, prev: map[string]bool{}, next: map[string]bool{}}
	if path != "" {
		if data, err := os.ReadFile(path); err == nil {
			var keys []string
			if json.Unmarshal(data, &keys) == nil {
				for _, k := range keys {
					m.prev[k] = true
				}
			}
		}
	}
	return m
}

// MemoPerEnv returns one memo per env, made on first use with the file path(env) names ("" for
// memory only), so envs audited by one process do not forget each other's verdicts.
func MemoPerEnv(path func(env string) string) func(env string) *Memo {
	var mu sync.Mutex
	memos := map[string]*Memo{}
	return func(env string) *Memo {
		mu.Lock()
		defer mu.Unlock()
		m, ok := memos[env]
		if !ok {
			m = NewMemo(path(env))
			memos[env] = m
		}
		return m
	}
}

// argoVersion is the argo-cd module whose diff the verdicts come from.
var argoVersion = func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/argoproj/argo-cd/v3" {
				return d.Version
			}
		}
	}
	return "unknown"
}()

// key is the memo key of one pair under a settings digest; "" when the pair cannot be keyed.
func memoKey(settings string, desired, live *unstructured.Unstructured) string {
	if live == nil || live.GetUID() == "" || live.GetResourceVersion() == "" {
		return ""
	}
	d, err := json.Marshal(desired.Object)
	if err != nil {
		return ""
	}
	h := sha256.New()
	h.Write([]byte(settings))
	h.Write(d)
	h.Write([]byte{0})
	h.Write([]byte(string(live.GetUID()) + "/" + live.GetResourceVersion()))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func (m *Memo) inSync(key string) bool {
	if m == nil || key == "" {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.prev[key] || m.next[key] {
		m.next[key] = true
		return true
	}
	return false
}

func (m *Memo) remember(key string) {
	if m == nil || key == "" {
		return
	}
	m.mu.Lock()
	m.next[key] = true
	m.mu.Unlock()
}

// Done ends a run: what this run used or learned is kept, the rest forgotten, and the file (if
// any) rewritten atomically. A memo that cannot be written is only slower next time.
func (m *Memo) Done() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.prev, m.next = m.next, map[string]bool{}
	keys := make([]string, 0, len(m.prev))
	for k := range m.prev {
		keys = append(keys, k)
	}
	m.mu.Unlock()
	if m.path == "" {
		return
	}
	data, err := json.Marshal(keys)
	if err != nil || os.MkdirAll(filepath.Dir(m.path), 0o700) != nil {
		return
	}
	_ = atomicfile.Write(m.path, data)
}
