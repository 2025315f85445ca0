// Package daemon runs the drift engine continuously: it watches live objects and re-audits when
// they change, fetches Git on an interval and on a push webhook, and hands new and resolved drift
// to the chat sinks. Only the leader (a Lease) posts; every replica audits and serves HTTP.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/atomicfile"
	"github.com/llm-gitops/platform/internal/audit"
	"github.com/llm-gitops/platform/internal/auditlog"
	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/episode"
	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/live"
	"github.com/llm-gitops/platform/internal/render"
	"github.com/llm-gitops/platform/internal/report"
)

// Daemon is one running auditor.
type Daemon struct {
	cfg     *Config
	rest    *rest.Config
	log     *slog.Logger
	metrics *metrics

	mu           sync.RWMutex
	repo         *gitrepo.Repo
	cache        *live.Cache
	stopCache    context.CancelFunc // ends the cache's informers (with the daemon's context anyway)
	reports      map[string]*drift.Report
	errs         map[string]error
	lastFetch    time.Time
	fetchErr     error
	hooked       map[cache.SharedIndexInformer]bool
	auditor      *audit.Auditor  // kept while repo and cache are: its schema and render caches persist
	people       *auditlog.Store // audit events, when configured
	episodes     *episode.Book   // drift episodes, saved in the state dir
	adoptRenders *render.Cache   // renders of the walks that name adopting commits (audit loop only)
	peopleMu     sync.Mutex
	firstSeen    map[string]time.Time     // fields without a person yet: when first seen
	held         map[string]*drift.Report // per env, the report held back waiting for people
	hmacKey      []byte                   // keys the HMACs that stand for Secret values in reports
	saveMu       sync.Mutex               // one tracker save at a time
	rendered     int                      // renders kustomize ran, as of the last full audit
	lastFull     time.Time                // when every env was last audited in full

	scheduleWake []chan struct{} // one per schedule runner: a revision was fetched

	ledgerSeen map[string]string // env -> revision whose ledger records are written
	ledgerBusy map[string]bool
	wg         sync.WaitGroup // background writes (ledger)

	outboxes    []*report.Outbox
	tracker     *report.Tracker
	notifier    *report.Notifier
	dispatchers []*report.Dispatcher
	secret      string
	authorize   func(*http.Request) (int, string)

	leader    atomic.Bool
	leaderMu  sync.Mutex    // orders taking leadership over against losing it
	identity  string        // this replica's name in the Lease
	decided   chan struct{} // closed once the first leader is known
	ready     atomic.Bool
	addr      string
	listening chan struct{}
	dirty     chan struct{}
	fetch     chan struct{}

	touchMu sync.Mutex
	touched map[drift.Ref]bool // objects the watches saw change since the last audit
	full    bool               // a change that needs every env re-audited in full
}

// New prepares a daemon: sinks, outboxes and the tracker state are opened; nothing runs yet.
func New(cfg *Config, restCfg *rest.Config, log *slog.Logger) (*Daemon, error) {
	if log == nil {
		log = slog.Default()
	}
	d := &Daemon{cfg: cfg, rest: restCfg, log: log, metrics: newMetrics(), reports: map[string]*drift.Report{},
		errs: map[string]error{}, hooked: map[cache.SharedIndexInformer]bool{}, decided: make(chan struct{}),
		ledgerSeen: map[string]string{}, ledgerBusy: map[string]bool{},
		dirty: make(chan struct{}, 1), fetch: make(chan struct{}, 1), listening: make(chan struct{})}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	if w := cfg.Webhook; w != nil && (w.SecretFile != "" || w.SecretEnv != "") {
		s, err := report.ReadSecret("git webhook secret", w.SecretFile, w.SecretEnv)
		if err != nil {
			return nil, err
		}
		d.secret = s
	}
	authorize, err := apiAuth(cfg.API, restCfg)
	if err != nil {
		return nil, err
	}
	d.authorize = authorize
	d.metrics.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "auditor_watch_starts_total",
		Help: "Watch requests the informers made: one per kind, then one per reconnect."}, func() float64 {
		d.mu.RLock()
		defer d.mu.RUnlock()
		if d.cache == nil {
			return 0
		}
		return float64(d.cache.WatchStarts())
	}))
	for _, mode := range []string{"full", "incremental"} {
		d.metrics.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "auditor_audits_total",
			Help:        "Audits by mode: full (render, every object) or incremental (the objects a watch event touched).",
			ConstLabels: prometheus.Labels{"mode": mode}}, func() float64 {
			d.mu.RLock()
			a := d.auditor
			d.mu.RUnlock()
			if a == nil {
				return 0
			}
			full, incr := a.Counts()
			if mode == "full" {
				return float64(full)
			}
			return float64(incr)
		}))
	}
	key, err := drift.InstallKey(filepath.Join(cfg.StateDir, "secret-hmac.key"))
	if err != nil {
		return nil, err
	}
	d.hmacKey = key
	if d.episodes, err = loadEpisodes(cfg); err != nil {
		return nil, err
	}
	d.tracker = report.NewTracker()
	if data, err := os.ReadFile(d.trackerFile()); err == nil {
		if err := json.Unmarshal(data, d.tracker); err != nil {
			return nil, fmt.Errorf("drift state %s: %w", d.trackerFile(), err)
		}
	}
	var outboxes []*report.Outbox
	for _, sc := range cfg.Sinks {
		sink, err := newSink(sc)
		if err != nil {
			return nil, fmt.Errorf("sink %s: %w", sc.Name, err)
		}
		ob, err := report.OpenOutbox(filepath.Join(cfg.StateDir, "outbox", sc.Name), cfg.OutboxMax)
		if err != nil {
			return nil, fmt.Errorf("sink %s: %w", sc.Name, err)
		}
		outboxes = append(outboxes, ob)
		disp := report.NewDispatcher(sink, ob, report.DispatcherConfig{BackoffBase: cfg.Dispatch.BackoffBase.Duration,
			BackoffMax: cfg.Dispatch.BackoffMax.Duration, Rate: cfg.Dispatch.Rate, Burst: cfg.Dispatch.Burst, Logger: log,
			Paused: func() bool { return !d.leader.Load() }})
		d.dispatchers = append(d.dispatchers, disp)
		d.metrics.sinkMetrics(sc.Name, disp)
	}
	d.outboxes = outboxes
	d.identity = leaderIdentity(cfg.LeaderElection)
	if cfg.AuditEvents.enabled() {
		d.people = auditlog.NewStore(cfg.AuditEvents.Max)
	}
	if cfg.LeaderElection.Enabled {
		if err := d.shareRecords(); err != nil {
			return nil, err
		}
	}
	opts := report.Options{ArgoCDURL: cfg.ArgoCDURL, AppName: func(env string) string { return cfg.AppNamePrefix + env },
		ReadFile: d.readFile}
	d.notifier = report.NewNotifier(report.NotifierConfig{Window: cfg.FoldWindow.or(10 * time.Second), Options: opts,
		Outboxes: outboxes, Tracker: d.tracker, Logger: log, Leading: true, OnEnqueued: d.saveTracker, Resolve: d.resolve})
	return d, nil
}

func newSink(sc SinkConfig) (report.Sink, error) {
	switch {
	case sc.Slack != nil:
		return report.NewSlackSink(*sc.Slack)
	case sc.Mattermost != nil:
		return report.NewMattermostSink(*sc.Mattermost)
	default:
		return report.NewTelegramSink(*sc.Telegram)
	}
}

// peopleWait is how long a new drift waits for the audit event of the write that made it (the
// audit log is read every second; the webhook backend batches) before it is announced without.
const peopleWait = 10 * time.Second

// awaitPeople holds the report back when audit events are configured and a field written in the
// last peopleWait has no person yet: its objects are audited again in a second, by when the event
// has usually arrived. Past peopleWait the drift is announced as it is.
func (d *Daemon) awaitPeople(rep *drift.Report) bool {
	if d.people == nil {
		return false
	}
	now := time.Now()
	d.peopleMu.Lock()
	if d.firstSeen == nil {
		d.firstSeen, d.held = map[string]time.Time{}, map[string]*drift.Report{}
	}
	present := map[string]bool{}
	var wait []drift.Ref
	for i := range rep.Objects {
		o := &rep.Objects[i]
		hold := false
		for _, f := range o.Fields {
			if f.Actor != nil {
				continue
			}
			// From when the daemon first saw the field without a person (not managedFields' time,
			// which a writer that keeps writing keeps fresh).
			k := rep.Env + "|" + o.Kind + "|" + o.Namespace + "|" + o.Name + "|" + f.Path
			present[k] = true
			if _, ok := d.firstSeen[k]; !ok {
				d.firstSeen[k] = now
			}
			hold = hold || now.Sub(d.firstSeen[k]) < peopleWait
		}
		if hold {
			wait = append(wait, drift.RefOfObject(o))
		}
	}
	for k := range d.firstSeen { // forget fields of this env that are gone
		if strings.HasPrefix(k, rep.Env+"|") && !present[k] {
			delete(d.firstSeen, k)
		}
	}
	d.peopleMu.Unlock()
	if len(wait) == 0 {
		return false
	}
	time.AfterFunc(time.Second, func() {
		for _, r := range wait {
			d.touchRef(r)
		}
	})
	return true
}

// vanished returns the drift of held (a report held back) that cur no longer has: whole objects,
// or the fields of an object cur still lists.
func vanished(held, cur *drift.Report) []drift.Object {
	if held == nil {
		return nil
	}
	now := map[string]map[string]bool{}
	for _, o := range cur.Objects {
		fs := map[string]bool{}
		for _, f := range o.Fields {
			fs[f.Path] = true
		}
		now[o.Kind+"|"+o.Namespace+"|"+o.Name] = fs
	}
	var out []drift.Object
	for _, o := range held.Objects {
		fs, ok := now[o.Kind+"|"+o.Namespace+"|"+o.Name]
		if !ok {
			out = append(out, o)
			continue
		}
		gone := o
		gone.Fields = nil
		for _, f := range o.Fields {
			if !fs[f.Path] {
				gone.Fields = append(gone.Fields, f)
			}
		}
		if len(gone.Fields) > 0 {
			out = append(out, gone)
		}
	}
	return out
}

// resolve says how a resolved item ended: from its episode, else from the watch's copy of the
// object (who set the field back).
func (d *Daemon) resolve(it report.Item, revision string) *report.Resolution {
	path := ""
	if f := it.Field(); f != nil {
		path = f.Path
	}
	o := it.Object
	if e, ok := d.episodes.LastEnded(episode.Identity(it.Env, o.APIVersion, o.Kind, o.Namespace, o.Name, path)); ok {
		return report.ResolutionOf(e)
	}
	live, ok := d.liveObject(o.APIVersion, o.Kind, o.Namespace, o.Name)
	if !ok {
		return nil
	}
	return report.Resolve(it, live, revision)
}

// liveObject is the watch's copy of an object.
func (d *Daemon) liveObject(apiVersion, kind, namespace, name string) (*unstructured.Unstructured, bool) {
	d.mu.RLock()
	c := d.cache
	d.mu.RUnlock()
	if c == nil {
		return nil, false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false
	}
	return c.Get(gv.WithKind(kind), namespace, name)
}

func (d *Daemon) trackerFile() string { return filepath.Join(d.cfg.StateDir, "drift-state.json") }

// Run audits until ctx ends, then flushes and stops every goroutine it started.
func (d *Daemon) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		d.wg.Wait()
		d.notifier.Close()
		for _, disp := range d.dispatchers {
			disp.Close()
		}
	}()
	srvErr := make(chan error, 1)
	wg.Add(1)
	go func() { defer wg.Done(); srvErr <- d.serveHTTP(ctx) }()
	if f := d.cfg.AuditEvents.File; f != "" && d.people != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			auditlog.File{Path: f}.Follow(ctx, d.people, time.Second, func(err error) { d.log.Warn("read audit log", "err", err) })
		}()
	}
	if d.cfg.LeaderElection.Enabled {
		wg.Add(1)
		go func() { defer wg.Done(); d.campaign(ctx) }()
	} else {
		d.setLeader(true)
		close(d.decided)
	}
	if err := d.connect(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while still connecting: nothing to audit yet
		}
		return err
	}
	if d.cfg.Schedule.Enabled {
		wg.Add(1)
		go func() { defer wg.Done(); d.runSchedules(ctx) }()
	}
	// The first audit waits for the first leader: a follower must not announce, and the leader
	// must not take what it finds at start as already announced.
	select {
	case <-d.decided:
	case <-ctx.Done():
		return nil
	}
	fetchTicker := time.NewTicker(d.cfg.FetchInterval.or(time.Minute))
	defer fetchTicker.Stop()
	d.auditAll(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-srvErr:
			return err
		case <-d.dirty:
			d.debounce(ctx)
			d.auditChanged(ctx)
		case <-fetchTicker.C:
			d.refreshRepo(ctx)
			d.auditFetched(ctx)
		case <-d.fetch:
			d.refreshRepo(ctx)
			d.auditFetched(ctx)
		}
	}
}

// connect opens the repository and the cluster, retrying while either is unreachable.
func (d *Daemon) connect(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := d.tryConnect(ctx)
		if err == nil {
			return nil
		}
		d.log.Error("connect", "err", err, "attempt", attempt)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Duration(attempt+1)*time.Second, 30*time.Second)):
		}
	}
}

func (d *Daemon) tryConnect(ctx context.Context) error {
	if d.repo == nil {
		repo, err := d.openRepo(ctx)
		if err != nil {
			return err
		}
		d.mu.Lock()
		d.repo, d.lastFetch = repo, time.Now()
		d.mu.Unlock()
		d.metrics.gitLastFetch.SetToCurrentTime()
	}
	// The cache's informers live as long as its context: a connect that fails past this point
	// stops them instead of leaving them running beside the next attempt's.
	cctx, stop := context.WithCancel(ctx)
	c, err := live.New(cctx, d.rest)
	if err != nil {
		stop()
		return err
	}
	// Scoped, the auditor reads namespaced kinds (Secrets included) only where the envs live,
	// and Applications only in Argo CD's namespace.
	if len(d.cfg.WatchNamespaces) > 0 {
		c.ScopeTo(d.cfg.WatchNamespaces, map[schema.GroupVersionKind][]string{argocd.ApplicationGVK: {d.cfg.AppNamespace}})
	}
	// Applications change when Argo CD syncs: a new synced revision is a reason to re-audit.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := c.Watch(wctx, nil, []schema.GroupVersionKind{argocd.ApplicationGVK}); err != nil {
		stop()
		return err
	}
	d.mu.Lock()
	d.cache, d.stopCache = c, stop
	d.mu.Unlock()
	return nil
}

// refreshRepo fetches Git; on failure the last good revision keeps being audited.
//
// A URL is cloned once into memory and then fetched incrementally (only new objects travel),
// with RepoAuth's credentials and FetchTimeout per operation; errors name the URL without user
// info. A local directory is read in place, and sees new commits without a fetch.
func (d *Daemon) refreshRepo(ctx context.Context) {
	d.mu.RLock()
	repo := d.repo
	d.mu.RUnlock()
	var err error
	if repo == nil {
		repo, err = d.openRepo(ctx)
	} else {
		fctx, cancel := context.WithTimeout(ctx, d.cfg.FetchTimeout.or(30*time.Second))
		err = repo.Fetch(fctx)
		cancel()
	}
	d.mu.Lock()
	if err != nil {
		d.fetchErr = err
		d.metrics.gitFetchErrors.Inc()
		d.log.Error("git fetch failed; auditing the last fetched revision", "err", err, "stale", time.Since(d.lastFetch).Round(time.Second))
		d.mu.Unlock()
		return
	}
	d.repo, d.lastFetch, d.fetchErr = repo, time.Now(), nil
	d.metrics.gitLastFetch.SetToCurrentTime()
	d.mu.Unlock()
	d.wakeSchedules()
}

// openRepo opens the repository: a directory in place, a URL cloned into memory with RepoAuth.
func (d *Daemon) openRepo(ctx context.Context) (*gitrepo.Repo, error) {
	if !gitrepo.IsURL(d.cfg.Repo) {
		return gitrepo.Open(d.cfg.Repo)
	}
	rc := d.cfg.RepoAuth
	rc.URL = d.cfg.Repo
	remote, err := gitrepo.NewRemote(rc)
	if err != nil {
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, d.cfg.FetchTimeout.or(30*time.Second))
	defer cancel()
	return remote.Open(octx)
}

func (d *Daemon) debounce(ctx context.Context) {
	t := time.NewTimer(d.cfg.Debounce.or(50 * time.Millisecond))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	select { // events that came during the wait are covered by this audit
	case <-d.dirty:
	default:
	}
}

// auditorFor returns the daemon's Auditor, made anew only when the repository or the live cache
// changed, so renders are cached by what they read and the schema by its documents across audits.
func (d *Daemon) auditorFor(repo *gitrepo.Repo, c *live.Cache) *audit.Auditor {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a := d.auditor; a != nil && a.Repo == repo && a.Live == c {
		return a
	}
	a := audit.New(repo, c)
	a.People = d.people
	a.AppNamespace = d.cfg.AppNamespace
	a.AppName = func(env string) string { return d.cfg.AppNamePrefix + env }
	a.Renders = render.NewCache("", 2) // the synced revision and the one before: a 10,000-object render is ~50 MiB
	a.Renders.Shared = true            // decoded once per revision, not at every full audit
	a.Options.SecretKey = d.hmacKey
	d.auditor = a
	return a
}

// auditAll audits every env in full; an env that fails keeps its last report and the others go on.
func (d *Daemon) auditAll(ctx context.Context) {
	d.takeTouched() // a full audit covers what the watches saw so far
	d.lastFull = time.Now()
	if d.eachEnv(ctx, func(a *audit.Auditor, env string) (*drift.Report, error) { return a.Run(ctx, audit.Request{Env: env}) }) {
		d.ready.Store(true)
	}
}

// auditFetched audits after a fetch: an env whose branch head or synced revision moved is
// audited in full (Update sees it), the others only for what the watches touched; every
// ResyncInterval everything is audited in full, which also takes up what no watch reports
// (argocd-cm's customizations when not watched, a CRD's new schema).
func (d *Daemon) auditFetched(ctx context.Context) {
	if time.Since(d.lastFull) >= d.cfg.ResyncInterval.or(5*time.Minute) {
		d.auditAll(ctx)
		return
	}
	d.auditChanged(ctx)
}

// auditChanged audits what the watches saw change: every env in full when a change could not be
// named, else only the touched objects on top of each env's last full audit
// (audit.Auditor.Update, which audits an env in full when it must).
func (d *Daemon) auditChanged(ctx context.Context) {
	refs, full := d.takeTouched()
	if full {
		d.auditAll(ctx)
		return
	}
	ok := d.eachEnv(ctx, func(a *audit.Auditor, env string) (*drift.Report, error) { return a.Update(ctx, env, refs) })
	if !ok && ctx.Err() == nil {
		// What failed to be audited stays touched: the next audit (event or fetch) takes it again.
		d.touchMu.Lock()
		d.full = true
		d.touchMu.Unlock()
	}
}

// eachEnv audits every env with run, records and announces each report, subscribes to the
// informers the audits started, and gives back the memory of a render kustomize just made. It
// says whether every env's audit succeeded.
func (d *Daemon) eachEnv(ctx context.Context, run func(a *audit.Auditor, env string) (*drift.Report, error)) bool {
	d.mu.RLock()
	repo, c := d.repo, d.cache
	d.mu.RUnlock()
	a := d.auditorFor(repo, c)
	allOK := true
	for _, env := range d.cfg.Envs {
		start := time.Now()
		a.Options.Controllers = d.cfg.controllersFor(env)
		rep, err := run(a, env)
		allOK = d.audited(ctx, env, rep, err, start) && allOK
	}
	d.hookInformers(c)
	if rendered := a.Renders.Stats().Rendered; rendered != d.rendered {
		// Kustomize just built and dropped a whole render: give that memory back to the system
		// now rather than keep the process at its peak (10,000 objects: ~1 GiB during a render).
		d.rendered = rendered
		debug.FreeOSMemory()
	}
	return allOK
}

// audited records one env's audit and announces its report; it says whether the audit succeeded.
func (d *Daemon) audited(ctx context.Context, env string, rep *drift.Report, err error, start time.Time) bool {
	d.metrics.auditDuration.WithLabelValues(env).Observe(time.Since(start).Seconds())
	d.mu.Lock()
	d.errs[env] = err
	if err == nil {
		d.reports[env] = rep
	}
	d.mu.Unlock()
	if err != nil {
		d.metrics.auditErrors.WithLabelValues(env).Inc()
		if ctx.Err() == nil {
			d.log.Error("audit failed", "env", env, "err", err)
		}
		return false
	}
	d.metrics.lastSuccess.WithLabelValues(env).SetToCurrentTime()
	d.metrics.observe(rep)
	d.recordEpisodes(rep)
	d.announce(rep)
	d.recordSync(ctx, rep)
	return true
}

// announce hands a report to the notifier. A follower leaves the tracker alone: what it saw
// was not announced by it, and must be when it leads (it then announces relative to what it
// last announced itself; a duplicate is the price of never losing one).
//
// While Argo CD syncs another revision, nothing is announced: what it has applied so far is
// compared with the old revision and would read as drift, and resolve as soon as it finishes.
// The report after the operation says what stands.
func (d *Daemon) announce(rep *drift.Report) {
	if !d.leader.Load() || rep.Syncing() {
		return
	}
	if d.awaitPeople(rep) {
		d.peopleMu.Lock()
		d.held[rep.Env] = rep
		d.peopleMu.Unlock()
		return
	}
	d.peopleMu.Lock()
	held := d.held[rep.Env]
	delete(d.held, rep.Env)
	d.peopleMu.Unlock()
	if gone := vanished(held, rep); len(gone) > 0 {
		// Drift that came and went while it waited for its person (Argo CD's selfHeal): it is
		// announced, then resolved, like any other.
		seen := *rep
		seen.Objects = append(slices.Clone(rep.Objects), gone...)
		if err := d.notifier.Observe(&seen); err != nil {
			d.log.Error("track drift", "env", rep.Env, "err", err)
		}
	}
	if err := d.notifier.Observe(rep); err != nil {
		d.log.Error("track drift", "env", rep.Env, "err", err)
		return
	}
	d.saveTracker()
}

// saveTracker persists what has been announced: drift still being folded is left out, so it is
// announced after a crash rather than lost. Called after each report and each enqueue.
func (d *Daemon) saveTracker() {
	d.saveMu.Lock()
	defer d.saveMu.Unlock()
	data, err := d.notifier.State()
	if err == nil {
		err = atomicfile.Write(d.trackerFile(), data)
	}
	if err != nil {
		d.log.Error("save drift state", "err", err)
	}
}

// hookInformers subscribes to every informer the audits started: a change to an object re-audits
// it (status-only writes and resyncs are ignored); a change to an Application's spec or synced
// revision re-audits in full.
func (d *Daemon) hookInformers(c *live.Cache) {
	kinds := append([]schema.GroupVersionKind{argocd.ApplicationGVK}, drift.DefaultExtraKinds...)
	kinds = append(kinds, c.Kinds()...)
	for _, gvk := range kinds {
		for _, inf := range c.Informers(gvk) { // new ones too: a kind's informers can be replaced
			if d.hooked[inf] {
				continue
			}
			d.hooked[inf] = true
			d.hook(gvk, inf)
		}
	}
}

// hook subscribes to one informer of gvk.
func (d *Daemon) hook(gvk schema.GroupVersionKind, inf cache.SharedIndexInformer) {
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { d.touch(gvk, obj) },
		UpdateFunc: func(old, cur any) {
			o, ok1 := live.AsUnstructured(gvk, old)
			n, ok2 := live.AsUnstructured(gvk, cur)
			if ok1 && ok2 && !changed(gvk, o, n) {
				return
			}
			if ok1 && ok2 && gvk.GroupKind() == argocd.ApplicationGVK.GroupKind() && !appStateChanged(o, n) {
				// Only Argo CD's verdicts moved: re-audit the resources whose verdict did, not
				// the whole env.
				for _, r := range verdictsChanged(o, n) {
					d.touchRef(r)
				}
				return
			}
			d.touch(gvk, cur)
		},
		DeleteFunc: func(obj any) { d.touch(gvk, obj) },
	})
}

// changed says whether an update can change a verdict: not a resync (same resourceVersion) and
// not a write of status alone — except an Application's synced revision, which is the desired state.
func changed(gvk schema.GroupVersionKind, old, cur *unstructured.Unstructured) bool {
	if old.GetResourceVersion() == cur.GetResourceVersion() {
		return false
	}
	if gvk.GroupKind() == argocd.ApplicationGVK.GroupKind() {
		// Argo CD's Application has no status subresource: every reconcile (reconciledAt, health)
		// writes the main resource and bumps the generation. Only the spec, the compared and
		// synced revision(s), the state of a sync and Argo CD's verdicts change what the audit says.
		return appStateChanged(old, cur) || len(verdictsChanged(old, cur)) > 0
	}
	return !live.StatusOnly(old, cur)
}

// appStateChanged says whether what an Application says about the env's desired state or the
// state of a sync changed: the spec, the compared and synced revisions, the operation's phase
// and revision, the conditions (a comparison error).
func appStateChanged(old, cur *unstructured.Unstructured) bool {
	for _, path := range [][]string{{"spec"}, {"status", "sync", "revision"}, {"status", "sync", "revisions"},
		{"status", "history"}, {"status", "operationState", "phase"}, {"status", "operationState", "syncResult", "revision"},
		{"status", "conditions"}} {
		o, _, _ := unstructured.NestedFieldNoCopy(old.Object, path...)
		n, _, _ := unstructured.NestedFieldNoCopy(cur.Object, path...)
		if !equality.Semantic.DeepEqual(o, n) {
			return true
		}
	}
	return false
}

// verdictsChanged returns the resources whose verdict in status.resources differs between two
// versions of an Application (listed in one only, or with another sync status).
func verdictsChanged(old, cur *unstructured.Unstructured) []drift.Ref {
	was, now := resourceStatuses(old), resourceStatuses(cur)
	var out []drift.Ref
	for r, st := range now {
		if was[r] != st {
			out = append(out, r)
		}
	}
	for r := range was {
		if _, ok := now[r]; !ok {
			out = append(out, r)
		}
	}
	return out
}

// resourceStatuses maps each resource of an Application's status.resources to its sync status.
func resourceStatuses(app *unstructured.Unstructured) map[drift.Ref]string {
	rs, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	out := make(map[drift.Ref]string, len(rs))
	for _, r := range rs {
		m, _ := r.(map[string]any)
		str := func(k string) string { v, _ := m[k].(string); return v }
		out[drift.Ref{Group: str("group"), Kind: str("kind"), Namespace: str("namespace"), Name: str("name")}] = str("status")
	}
	return out
}

// touchRef asks for a re-audit of one object.
func (d *Daemon) touchRef(r drift.Ref) {
	d.touchMu.Lock()
	if d.touched == nil {
		d.touched = map[drift.Ref]bool{}
	}
	d.touched[r] = true
	d.touchMu.Unlock()
	d.markDirty()
}

// touch records that the watch saw obj of gvk change and asks for a re-audit.
func (d *Daemon) touch(gvk schema.GroupVersionKind, obj any) {
	u, ok := live.AsUnstructured(gvk, obj)
	d.touchMu.Lock()
	if ok {
		if d.touched == nil {
			d.touched = map[drift.Ref]bool{}
		}
		d.touched[drift.Ref{Group: gvk.Group, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}] = true
	} else {
		d.full = true // an object the watch could not name
	}
	d.touchMu.Unlock()
	d.markDirty()
}

// takeTouched returns and forgets what the watches saw change, and whether a full audit is due.
func (d *Daemon) takeTouched() ([]drift.Ref, bool) {
	d.touchMu.Lock()
	defer d.touchMu.Unlock()
	refs := make([]drift.Ref, 0, len(d.touched))
	for r := range d.touched {
		refs = append(refs, r)
	}
	full := d.full
	d.touched, d.full = nil, false
	return refs, full
}

func (d *Daemon) markDirty() {
	select {
	case d.dirty <- struct{}{}:
	default:
	}
}

// TriggerFetch asks for a Git fetch and a re-audit (the push webhook).
func (d *Daemon) TriggerFetch() {
	select {
	case d.fetch <- struct{}{}:
	default:
	}
}

func (d *Daemon) setLeader(on bool) {
	d.leader.Store(on)
	for _, disp := range d.dispatchers {
		disp.Wake()
	}
	if on {
		d.metrics.leader.Set(1)
	} else {
		d.metrics.leader.Set(0)
	}
}

// Status is the daemon's state for GET /api/v1/status.
type Status struct {
	Ready     bool              `json:"ready"`
	Leader    bool              `json:"leader"`
	Envs      []EnvStatus       `json:"envs"`
	Git       GitStatus         `json:"git"`
	Sinks     map[string]string `json:"sinks,omitempty"`
	Timestamp time.Time         `json:"timestamp"`
}

// EnvStatus is one env's last audit.
type EnvStatus struct {
	Env      string `json:"env"`
	Revision string `json:"revision,omitempty"`
	InSync   bool   `json:"inSync"`
	Drifted  int    `json:"driftedObjects"`
	Error    string `json:"error,omitempty"`
}

// GitStatus says how fresh the audited Git state is.
type GitStatus struct {
	LastFetch    time.Time `json:"lastFetch"`
	StaleSeconds float64   `json:"staleSeconds"`
	Error        string    `json:"error,omitempty"`
}

func (d *Daemon) status() Status {
	d.mu.RLock()
	defer d.mu.RUnlock()
	st := Status{Ready: d.ready.Load(), Leader: d.leader.Load(), Timestamp: time.Now().UTC()}
	for _, env := range d.cfg.Envs {
		es := EnvStatus{Env: env}
		if rep := d.reports[env]; rep != nil {
			es.Revision, es.InSync, es.Drifted = rep.Revision, rep.InSync, len(rep.Objects)
		}
		if err := d.errs[env]; err != nil {
			es.Error = err.Error()
		}
		st.Envs = append(st.Envs, es)
	}
	st.Git = GitStatus{LastFetch: d.lastFetch.UTC(), StaleSeconds: time.Since(d.lastFetch).Seconds()}
	if d.fetchErr != nil {
		st.Git.Error = d.fetchErr.Error()
	}
	sort.Slice(st.Envs, func(i, j int) bool { return st.Envs[i].Env < st.Envs[j].Env })
	return st
}

// Report returns the last report of env.
func (d *Daemon) Report(env string) (*drift.Report, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if rep, ok := d.reports[env]; ok {
		return rep, nil
	}
	if err := d.errs[env]; err != nil {
		return nil, err
	}
	return nil, errors.New("no audit yet")
}
