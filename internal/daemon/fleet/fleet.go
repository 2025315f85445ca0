// Package fleet keeps the clusters the auditor reads besides Argo CD's own. Each is read with the
// auditor's own read-only credentials (a kubeconfig per cluster), never Argo CD's, and is matched
// to an Application's destination by server URL or name. Its live cache starts at first use; a
// cluster that stops answering is reported unreachable until it answers again, while the other
// clusters are read on.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"golang.org/x/sync/errgroup"

	"github.com/llm-gitops/platform/internal/engine/live"
)

// Cluster is one cluster the auditor reads: the name reports give it (Argo CD's cluster name,
// by convention), the server URL Argo CD's cluster Secret and Applications name it by, and the
// auditor's own kubeconfig (and context) for it. AuditLog, when set, is that cluster's API
// server audit log (JSON lines), which names the people behind edits there.
type Cluster struct {
	Name       string `json:"name"`
	Server     string `json:"server"`
	Kubeconfig string `json:"kubeconfig"`
	Context    string `json:"context,omitempty"`
	AuditLog   string `json:"auditLog,omitempty"`
	// WatchNamespaces, as the daemon's key of that name, scopes what is read there (the
	// daemon's own by default).
	WatchNamespaces []string `json:"watchNamespaces,omitempty"`
}

// Status is one cluster's state: whether it answered the last probe, the error when it did not,
// and since when it is in that state.
type Status struct {
	Name      string    `json:"name"`
	Server    string    `json:"server"`
	Reachable bool      `json:"reachable"`
	Error     string    `json:"error,omitempty"`
	Since     time.Time `json:"since"`
}

// UnreachableError says a cluster did not answer.
type UnreachableError struct {
	Cluster string
	Err     error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cluster %s unreachable: %v", e.Cluster, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Fleet resolves destinations to live caches. Make one with New.
type Fleet struct {
	ctx context.Context // the caches' informers live as long as it
	// Probe is how long a probe's answer stands before the next use of a cluster probes again
	// (default 2 s); ProbeTimeout bounds a probe (default 3 s).
	Probe, ProbeTimeout time.Duration
	// Hint ends the error for a destination no cluster of the fleet is (default: "add it to
	// clusters", the daemon's config key).
	Hint string
	// Probes, when set, picks the clusters Watch probes: a replica that shares the work probes
	// those it audits. Nil probes every one. A cluster not probed keeps its last status.
	Probes func(name string) bool
	// OnInformer, when set, is given to each cluster's cache (live.Cache.SetInformerHook).
	OnInformer func(schema.GroupVersionKind, cache.SharedIndexInformer)

	mu      sync.Mutex
	members []*member
}

type member struct {
	Cluster
	cfg *rest.Config

	work sync.Mutex // one probe or cache start at a time; never held by readers of the state

	mu      sync.Mutex // guards the fields below, never across a network call
	cache   *live.Cache
	stop    context.CancelFunc // ends the cache's informers
	status  Status
	checked time.Time
	fails   int // probes failed in a row
}

// downAfter is how many probes in a row must fail before a reachable cluster is called
// unreachable: one lost probe (a blip) does not stop its audits nor post to chat.
const downAfter = 2

// newFleet is an empty fleet with the default probe timings.
func newFleet(ctx context.Context) *Fleet {
	return &Fleet{ctx: ctx, Probe: 2 * time.Second, ProbeTimeout: 3 * time.Second}
}

// add makes c a member, read with cfg, reachable until a probe says otherwise.
func (f *Fleet) add(c Cluster, cfg *rest.Config) {
	f.members = append(f.members, &member{Cluster: c, cfg: cfg,
		status: Status{Name: c.Name, Server: c.Server, Reachable: true, Since: time.Now().UTC()}})
}

// New reads each cluster's kubeconfig; ctx bounds the caches' informers.
func New(ctx context.Context, clusters []Cluster) (*Fleet, error) {
	f := newFleet(ctx)
	for _, c := range clusters {
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Kubeconfig}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
			&clientcmd.ConfigOverrides{CurrentContext: c.Context}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("cluster %s: kubeconfig %s: %w", c.Name, c.Kubeconfig, err)
		}
		f.add(c, cfg)
	}
	return f, nil
}

// FromKubeconfig is a fleet of the contexts of a kubeconfig (loaded by rules, as kubectl loads
// it), each cluster under its context's name, except those of server skip (the cluster already
// read). Of several contexts of one server, the first by name is taken. It is how a person's
// `auditor diff` reads the clusters their kubectl reaches.
func FromKubeconfig(ctx context.Context, rules clientcmd.ClientConfigLoader, skip string) (*Fleet, error) {
	raw, err := rules.Load()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	f := newFleet(ctx)
	f.Hint = "add a context for it to your kubeconfig"
	names := make([]string, 0, len(raw.Contexts))
	for name := range raw.Contexts {
		names = append(names, name)
	}
	sort.Strings(names)
	seen := map[string]bool{strings.TrimRight(skip, "/"): true}
	for _, name := range names {
		cl, ok := raw.Clusters[raw.Contexts[name].Cluster]
		if !ok || seen[strings.TrimRight(cl.Server, "/")] {
			continue
		}
		cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
		if err != nil {
			continue // a context kubectl could not use either
		}
		seen[strings.TrimRight(cl.Server, "/")] = true
		f.add(Cluster{Name: name, Server: cl.Server}, cfg)
	}
	return f, nil
}

// Resolve returns the live cache of the cluster an Application's destination names (by server
// URL, else by name) and the name reports give it. It fails when no cluster of the fleet is that
// destination, and with an *UnreachableError when the cluster does not answer.
func (f *Fleet) Resolve(ctx context.Context, server, name string) (*live.Cache, string, error) {
	m := f.member(server, name)
	if m == nil {
		dest := server
		if dest == "" {
			dest = name
		}
		hint := f.Hint
		if hint == "" {
			hint = "add it to clusters"
		}
		return nil, dest, fmt.Errorf("destination %s: the auditor has no credentials for that cluster (%s)", dest, hint)
	}
	c, err := m.get(ctx, f)
	return c, m.Name, err
}

func (f *Fleet) member(server, name string) *member {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.members {
		if server != "" && strings.TrimRight(m.Server, "/") == strings.TrimRight(server, "/") ||
			server == "" && name != "" && m.Name == name {
			return m
		}
	}
	return nil
}

// get probes the cluster (at most once per Probe) and returns its cache, started on first use.
func (m *member) get(ctx context.Context, f *Fleet) (*live.Cache, error) {
	m.work.Lock()
	defer m.work.Unlock()
	m.mu.Lock()
	stale, c := time.Since(m.checked) >= f.Probe, m.cache
	m.mu.Unlock()
	if stale || c == nil {
		m.setReachable(m.probe(ctx, f.ProbeTimeout))
	}
	m.mu.Lock()
	up, why := m.status.Reachable, m.status.Error
	m.mu.Unlock()
	if !up {
		return nil, &UnreachableError{Cluster: m.Name, Err: errors.New(why)}
	}
	if c != nil {
		return c, nil
	}
	cctx, stop := context.WithCancel(f.ctx)
	c, err := live.New(cctx, m.cfg)
	if err != nil {
		stop()
		m.setReachable(err)
		return nil, &UnreachableError{Cluster: m.Name, Err: err}
	}
	if f.OnInformer != nil {
		c.SetInformerHook(f.OnInformer)
	}
	if len(m.WatchNamespaces) > 0 {
		c.ScopeTo(m.WatchNamespaces, nil) // namespaced kinds, Secrets included, only there
	}
	m.mu.Lock()
	m.cache, m.stop = c, stop
	m.mu.Unlock()
	return c, nil
}

// Name returns the name of the cluster an Application's destination names (by server URL, else
// by name), without starting its cache; false when no cluster of the fleet is that destination.
func (f *Fleet) Name(server, name string) (string, bool) {
	if m := f.member(server, name); m != nil {
		return m.Name, true
	}
	return "", false
}

// Drop stops the cache of the cluster called name and forgets it: this replica no longer audits
// that cluster (another does), and its objects leave the memory. Its next use starts it anew.
func (f *Fleet) Drop(name string) {
	f.mu.Lock()
	members := append([]*member(nil), f.members...)
	f.mu.Unlock()
	for _, m := range members {
		if m.Name != name {
			continue
		}
		m.work.Lock()
		m.mu.Lock()
		if m.stop != nil {
			m.stop()
		}
		m.cache, m.stop = nil, nil
		m.mu.Unlock()
		m.work.Unlock()
	}
}

// probe asks the cluster who the auditor is (a SelfSubjectReview, which every authenticated
// user may make), bounded by timeout: an API server that does not answer, or that no longer
// takes the auditor's credentials, fails it. A cluster without that API is asked its version.
func (m *member) probe(ctx context.Context, timeout time.Duration) error {
	cfg := rest.CopyConfig(m.cfg)
	cfg.Timeout = timeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err = cs.AuthenticationV1().SelfSubjectReviews().Create(pctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cs.Discovery().ServerVersion()
	}
	return err
}

// setReachable records a probe's outcome; it says whether reachability changed.
func (m *member) setReachable(err error) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checked = time.Now()
	if err == nil {
		m.fails = 0
	} else if m.fails++; m.fails < downAfter && m.status.Reachable {
		return false // a blip, until the next probe says otherwise
	}
	up := err == nil
	changed := up != m.status.Reachable
	if changed {
		m.status.Since = m.checked.UTC()
	}
	m.status.Reachable, m.status.Error = up, ""
	if err != nil {
		m.status.Error = err.Error()
	}
	return changed
}

// probesAtOnce bounds the probes Watch runs at once: a round over many clusters, some of them
// down, lasts about one ProbeTimeout per probesAtOnce clusters down rather than one per cluster.
const probesAtOnce = 8

// Watch probes the clusters Probes picks each interval until ctx ends, several at once, and
// tells onChange of each cluster whose reachability changed since its last probe: a cluster that
// stops answering, or answers again, is then audited at once rather than at the next event that
// happens to touch it. onChange may be called from several goroutines at once.
func (f *Fleet) Watch(ctx context.Context, interval time.Duration, onChange func(Status)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.mu.Lock()
		members := append([]*member(nil), f.members...)
		f.mu.Unlock()
		var g errgroup.Group
		g.SetLimit(probesAtOnce)
		for _, m := range members {
			if f.Probes != nil && !f.Probes(m.Name) {
				continue
			}
			g.Go(func() error {
				m.work.Lock()
				changed := m.setReachable(m.probe(ctx, f.ProbeTimeout))
				m.work.Unlock()
				if changed && ctx.Err() == nil {
					m.mu.Lock()
					st := m.status
					m.mu.Unlock()
					onChange(st)
				}
				return nil
			})
		}
		_ = g.Wait() // a round ends before the next begins: one probe of a cluster at a time
	}
}

// Caches returns the caches started so far, by cluster name.
func (f *Fleet) Caches() map[string]*live.Cache {
	f.mu.Lock()
	members := append([]*member(nil), f.members...)
	f.mu.Unlock()
	out := map[string]*live.Cache{}
	for _, m := range members {
		m.mu.Lock()
		if m.cache != nil {
			out[m.Name] = m.cache
		}
		m.mu.Unlock()
	}
	return out
}

// Status returns each cluster's state as of its last probe, by name.
func (f *Fleet) Status() []Status {
	f.mu.Lock()
	members := append([]*member(nil), f.members...)
	f.mu.Unlock()
	out := make([]Status, 0, len(members))
	for _, m := range members {
		m.mu.Lock()
		out = append(out, m.status)
		m.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Reachable says whether the cluster named name answered its last probe (false for a name the
// fleet does not have).
func (f *Fleet) Reachable(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.members {
		if m.Name == name {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.status.Reachable
		}
	}
	return false
}
