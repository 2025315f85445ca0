package notify

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/llm-gitops/platform/internal/daemon/message"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// DefaultFoldWindow is how long a Folder collects items of an env before emitting them.
const DefaultFoldWindow = 10 * time.Second

// Fold turns the items of one env collected in one window into messages: one DriftMessage or
// ResolvedMessage for a single item, one digest (DigestMessage) for several.
func Fold(env string, added, resolved []Item, opts Options) []message.Message {
	var out []message.Message
	// An Application that could not be audited is not drift: it gets a message of its own,
	// never a line of a drift digest.
	added = apart(added, func(it Item) { out = append(out, NotAuditedMessage(it, opts)) })
	switch len(added) {
	case 0:
	case 1:
		out = append(out, DriftMessage(added[0], opts))
	default:
		out = append(out, DigestMessage(env, message.KindDigest, added, opts))
	}
	// "Audited again", never a line of "N drifts resolved".
	resolved = apart(resolved, func(it Item) { out = append(out, ResolvedMessage(it, opts)) })
	switch len(resolved) {
	case 0:
	case 1:
		out = append(out, ResolvedMessage(resolved[0], opts))
	default:
		out = append(out, DigestMessage(env, message.KindResolved, resolved, opts))
	}
	return out
}

// apart hands each item that stands for an Application not audited to say, and returns the
// others: such an item gets a message of its own, never a place in a digest.
func apart(items []Item, say func(Item)) []Item {
	return slices.DeleteFunc(slices.Clone(items), func(it Item) bool {
		_, ok := drift.NotAudited(&it.Object)
		if ok {
			say(it)
		}
		return ok
	})
}

// Folder collects items per env for Window after the first one arrives, then emits them folded
// (see Fold). It is safe for concurrent use.
type Folder struct {
	window time.Duration
	opts   Options
	emit   func([]message.Message)

	// leading sends the first items of a quiet env at once instead of after the window.
	leading bool

	mu      sync.Mutex
	pending map[foldKey]*foldBuf
	// inflight are buffers taken from pending whose messages emit has not returned from yet.
	inflight map[*foldBuf]bool
	closed   bool
	wg       sync.WaitGroup
}

// foldKey is what a Folder folds together: the items of one env on one cluster ("" for Argo
// CD's own). Items of two clusters are never one message, so that replicas that share the work
// by cluster each post whole messages of their own.
type foldKey struct{ env, cluster string }

type foldBuf struct {
	added, resolved map[string]Item
	timer           *time.Timer
}

// NewFolder returns a Folder that calls emit with the messages of each env when its window
// ends; window <= 0 means DefaultFoldWindow. emit is called from a timer goroutine, one env at
// a time per call.
func NewFolder(window time.Duration, opts Options, emit func([]message.Message)) *Folder {
	if window <= 0 {
		window = DefaultFoldWindow
	}
	return &Folder{window: window, opts: opts, emit: emit, pending: map[foldKey]*foldBuf{}, inflight: map[*foldBuf]bool{}}
}

// Add queues new and resolved items of env, folded per cluster. An item that appears and is
// resolved within one window is announced both ways (a hand edit that selfHeal reverted in a
// second is still a hand edit to report), unless it is only Argo CD's verdict
// (drift.ArgoCDOnly), whose status lags a write by a reconcile: that cancels out. An item
// resolved and back within one window cancels its resolution (chat already holds it as open).
func (f *Folder) Add(env string, added, resolved []Item) {
	type part struct{ added, resolved []Item }
	parts := map[string]*part{}
	at := func(it Item) *part {
		p := parts[it.Object.Cluster]
		if p == nil {
			p = &part{}
			parts[it.Object.Cluster] = p
		}
		return p
	}
	for _, it := range added {
		at(it).added = append(at(it).added, it)
	}
	for _, it := range resolved {
		at(it).resolved = append(at(it).resolved, it)
	}
	clusters := make([]string, 0, len(parts))
	for c := range parts {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters)
	for _, c := range clusters {
		f.add(foldKey{env, c}, parts[c].added, parts[c].resolved)
	}
}

// add queues the items of one fold key.
func (f *Folder) add(key foldKey, added, resolved []Item) {
	env := key.env
	var leading []message.Message // emitted after the lock is released: emit may ask for Unsent
	var lead *foldBuf             // its items, unsent until emit returns
	defer func() {
		if lead == nil {
			return
		}
		if len(leading) > 0 {
			f.emit(leading)
		}
		f.mu.Lock()
		delete(f.inflight, lead)
		f.mu.Unlock()
	}()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	b := f.pending[key]
	if b == nil {
		// Leading edge: the first drift after a quiet window goes out at once (on-call wants it
		// within a second); what follows within the window is folded into one digest.
		b = &foldBuf{added: map[string]Item{}, resolved: map[string]Item{}}
		f.pending[key] = b
		f.wg.Add(1)
		b.timer = time.AfterFunc(f.window, func() {
			defer f.wg.Done()
			f.flushKey(key, b)
		})
		if f.leading {
			leading = Fold(env, added, resolved, f.opts)
			lead = &foldBuf{added: map[string]Item{}, resolved: map[string]Item{}}
			for _, it := range added {
				lead.added[it.Key] = it
			}
			for _, it := range resolved {
				lead.resolved[it.Key] = it
			}
			f.inflight[lead] = true
			return
		}
	}
	for _, it := range added {
		if _, ok := b.resolved[it.Key]; ok {
			delete(b.resolved, it.Key)
			continue
		}
		b.added[it.Key] = it
	}
	for _, it := range resolved {
		if _, ok := b.added[it.Key]; ok && drift.ArgoCDOnly(&it.Object) {
			delete(b.added, it.Key)
			continue
		}
		b.resolved[it.Key] = it
	}
}

// flushKey emits b if it is still key's pending buffer.
func (f *Folder) flushKey(key foldKey, b *foldBuf) {
	f.mu.Lock()
	if f.pending[key] != b {
		f.mu.Unlock()
		return
	}
	delete(f.pending, key)
	f.inflight[b] = true
	f.mu.Unlock()
	if msgs := Fold(key.env, values(b.added), values(b.resolved), f.opts); len(msgs) > 0 {
		f.emit(msgs)
	}
	f.mu.Lock()
	delete(f.inflight, b)
	f.mu.Unlock()
}

// Flush emits everything pending now, without waiting for the windows to end.
func (f *Folder) Flush() {
	f.mu.Lock()
	bufs := f.pending
	f.pending = map[foldKey]*foldBuf{}
	var keys []foldKey
	for k, b := range bufs {
		if b.timer.Stop() {
			f.wg.Done() // the timer will not run
		}
		keys = append(keys, k)
		f.inflight[b] = true
	}
	f.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].env < keys[j].env || keys[i].env == keys[j].env && keys[i].cluster < keys[j].cluster
	})
	for _, k := range keys {
		b := bufs[k]
		if msgs := Fold(k.env, values(b.added), values(b.resolved), f.opts); len(msgs) > 0 {
			f.emit(msgs)
		}
		f.mu.Lock()
		delete(f.inflight, b)
		f.mu.Unlock()
	}
}

// Unsent returns the items being folded or emitted now: added and resolved items whose
// messages no emit has completed yet.
func (f *Folder) Unsent() (added, resolved []Item) {
	f.mu.Lock()
	defer f.mu.Unlock()
	collect := func(b *foldBuf) {
		added = append(added, values(b.added)...)
		resolved = append(resolved, values(b.resolved)...)
	}
	for _, b := range f.pending {
		collect(b)
	}
	for b := range f.inflight {
		collect(b)
	}
	return added, resolved
}

// SetLeading makes the Folder send the first items after a quiet window immediately and fold
// only those that follow within the window.
func (f *Folder) SetLeading(on bool) {
	f.mu.Lock()
	f.leading = on
	f.mu.Unlock()
}

// Close flushes what is pending, refuses further items and waits for running emits.
func (f *Folder) Close() {
	f.Flush()
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.wg.Wait()
}

func values(m map[string]Item) []Item {
	out := make([]Item, 0, len(m))
	for _, it := range m {
		out = append(out, it)
	}
	sortItems(out)
	return out
}
