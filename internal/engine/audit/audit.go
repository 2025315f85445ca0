// Package audit runs one audit of one environment end to end: it picks the revision Argo CD
// synced, renders it, brings the live cache up to date for its kinds, types both sides with the
// cluster's schema and compares.
package audit

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/engine/reposerver"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Config is what an Auditor is made with. New applies a default to each field left unset.
type Config struct {
	// Repo is the repository audited; Live the cluster's objects, watched.
	Repo *gitrepo.Repo
	Live *live.Cache
	// Drift adjusts the comparison's options after the defaults (drift.DefaultOptions, Argo CD's
	// defaults and built-in kinds, and a random SecretKey); nil keeps the defaults.
	Drift func(*drift.Options)
	// AppNamespace holds the Applications (default argocd); AppName maps an env to its own
	// Application (default llm-<env>; "": the env has none, only its root or selection).
	AppNamespace string
	AppName      func(env string) string
	// RootName maps an env to its root Application (app-of-apps; nil: RootName): when the
	// cluster has it, the env is the group of Applications under it.
	RootName func(env string) string
	// RootManifest maps an env to its root Application's manifest in Git (nil: RootManifest; "":
	// Git holds none).
	RootManifest func(env string) string
	// Select, when set, gives an env's selection: the cluster's Applications it picks join the
	// env's group (see AppSelection). Nil, or a nil selection: the root's tree alone.
	Select func(env string) *AppSelection
	// RepoURL is the URL Argo CD reads Repo by, for an env whose root and own Application do not
	// say it: an Application of another repository is then told apart.
	RepoURL string
	// Envs, when set, are every env the cluster holds: their roots and own Applications, made by
	// hand or by another env's root, are never Extra in another env's group. The layout's envs
	// (UseLayoutFrom) join them.
	Envs []string
	// layoutEnvs are the envs of the layout UseLayoutFrom follows.
	layoutEnvs func() []string
	// Renders caches renders by what they read (default: in memory, four per env; the CLI's is
	// on disk).
	Renders *render.Cache
	// Verdicts returns the memo of an env's Argo CD verdicts: the objects its diff found in sync
	// (default: in memory; a nil memo diffs every object).
	Verdicts func(env string) *argocd.Memo
	// SyncTimeout bounds the wait for the live cache of the kinds an audit needs (default 1m):
	// a kind that cannot be listed fails that audit, naming the kind, instead of hanging it.
	SyncTimeout time.Duration
	// Timing, when set, is told how long each stage of a Run took: git (Application and
	// revisions), render, live (list and watch), schema, compare, argocd.
	Timing func(stage string, took time.Duration)
	// RenderedInBackground, when set, lets a full audit of an env that has a report already (an
	// earlier full audit) leave a render the cache cannot answer (a new revision's: minutes at
	// 10,000 objects) running in the background, when Renders has a Worker: the audit returns a
	// *RenderingError at once, and RenderedInBackground(env) is called when the render ends. The
	// env's next full audit of that revision gets it (from the cache, or from the render when the
	// cache did not keep it), or its error. A daemon keeps auditing its other envs,
	// and this env's last report stands meanwhile: comparing the cluster with the revision
	// before would report Argo CD's sync of the new one as drift.
	RenderedInBackground func(env string)
	// People, when set, holds the API server's audit events: each drifted field gets the person
	// whose write made it (drift.Field.Actor).
	People *auditlog.Store
	// RepoServer, when set, renders each Application by asking Argo CD's repo-server, with the
	// request its application controller sends: the objects compared are then the ones Argo CD
	// applies, whatever the source (Helm repositories, OCI, plugins). Nil renders in process.
	RepoServer *reposerver.Client
	// Charts fetches the charts of chart repositories Applications name (default: anonymous
	// HTTP(S)).
	Charts *render.Charts
	// MaxApplications bounds the Applications of a group one audit renders (default 1000): past
	// it, each one more is listed as not audited, with the reason.
	MaxApplications int
	// Clusters, when set, gives the live cache of an Application's destination cluster other than
	// the one Live reads (Argo CD's own, where the Applications are), and the name reports give
	// it. Its error (no credentials, unreachable) makes the Application not audited, the others
	// going on. Nil: an Application of another cluster is not audited.
	Clusters func(ctx context.Context, server, name string) (c *live.Cache, display string, err error)
	// Owns, when set, says whether this auditor audits the Applications whose destination is
	// the cluster called cluster (InCluster for Argo CD's own; a member's name as Clusters gives
	// it, or its destination when no cluster of Clusters is that): replicas that share the work
	// by cluster each audit their own. The others are left out of the report; those of other
	// clusters are not rendered, and their caches not started. Applications on Argo CD's own
	// cluster are rendered anyway, for the Applications they declare, unless Argo CD's comparison
	// of the synced revision lists none (declaresNoApplications). ClusterName names a
	// destination without starting its cache. Nil audits every Application.
	Owns        func(cluster string) bool
	ClusterName func(server, name string) (string, bool)
	// State, when set, is where incremental audits keep what they build on (default: a new one):
	// the caller owns it.
	State *State
	// Controllers, when set, gives an env's controller rules (drift.Options.Controllers): the
	// controllers whose writes to fields Git declares are not drift there. Nil: the comparison's
	// defaults for every env.
	Controllers func(env string) []drift.ControllerRule
	// Steps add to each merged report what only the caller knows (this platform's GPU cost of a
	// drift: cost.Step), in order.
	Steps []drift.Step
}

// InCluster is the name Owns gives Argo CD's own cluster, as Argo CD names it.
const InCluster = "in-cluster"

// Auditor audits environments of one repository against one cluster. Make one with New.
type Auditor struct {
	Config
	// Options are the comparison's options; Schema and Normalizer are filled per audit.
	Options drift.Options

	// What the audits keep, each behind its own pointer: New sets every field of the Auditor and
	// nothing writes one after.
	state *State
	cache *caches
	count *counts
	bgs   *backgroundState // the renders left to the background (behind)
}

// State is what incremental audits build on: the last full audit of each Application and of
// each env's group. Config.State hands the caller's own; its zero value is empty and ready.
type State struct {
	mu     sync.Mutex
	units  map[string]*prepared      // the last full audit of each Application, by unit key
	last   map[string][]drift.Object // the drifted objects each unit's last audit found, by unit key
	groups map[string]*groupState    // the last full audit of each env's group, for Update
}

// caches are what the Auditor read once and reads again only when it changed.
type caches struct {
	argoMu sync.Mutex
	argo   reposerver.Settings // argocd-cm's, for the repo-server
	argoOf *string             // the resourceVersion they were read at ("": none)

	patchesMu sync.Mutex
	// patches caches Git's Application patches per env at a branch head (audits without Argo CD).
	patches map[string][]render.Patch

	schemaMu  sync.Mutex
	schemaKey string
	schema    *drift.Schema
}

// counts are the audits done, by kind.
type counts struct {
	runs, updates, aloneAudits atomic.Int64
}

// controllers are env's controller rules: Config.Controllers', else the comparison's defaults.
func (a *Auditor) controllers(env string) []drift.ControllerRule {
	if a.Controllers != nil {
		return a.Controllers(env)
	}
	return a.Options.Controllers
}

// Counts returns how many full audits of the cluster's state ended with a report (Run without a
// revision, including those Update fell back to) and how many incremental ones (Update on top of
// the last full audit) this Auditor did.
func (a *Auditor) Counts() (full, incremental int64) {
	return a.count.runs.Load(), a.count.updates.Load()
}

// New returns an Auditor made with cfg, a default applied to each field it leaves unset: the
// repository's conventions (Application llm-<env> in argocd, root-<env> over it), an in-memory
// render cache and verdict memo, and secret values reported as HMACs under a key of this process.
func New(cfg Config) *Auditor {
	opts := drift.DefaultOptions()
	opts.Defaults, opts.Builtin = argocd.Defaults, argocd.Builtin
	// Equal within a report, unrelated across runs, never reversible by a dictionary.
	opts.SecretKey = make([]byte, 32)
	if _, err := rand.Read(opts.SecretKey); err != nil {
		opts.SecretKey = nil // "(redacted)" only
	}
	if cfg.Drift != nil {
		cfg.Drift(&opts)
	}
	if cfg.AppNamespace == "" {
		cfg.AppNamespace = "argocd"
	}
	if cfg.AppName == nil {
		cfg.AppName = defaultAppName
	}
	if cfg.RootName == nil {
		cfg.RootName = RootName
	}
	if cfg.RootManifest == nil {
		cfg.RootManifest = RootManifest
	}
	if cfg.Renders == nil {
		cfg.Renders = render.NewCache("", 4)
	}
	if cfg.Verdicts == nil {
		cfg.Verdicts = argocd.MemoPerEnv(func(string) string { return "" })
	}
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = time.Minute
	}
	if cfg.Charts == nil {
		cfg.Charts = &render.Charts{}
	}
	if cfg.MaxApplications <= 0 {
		cfg.MaxApplications = 1000
	}
	if cfg.State == nil {
		cfg.State = &State{}
	}
	return &Auditor{Config: cfg, Options: opts, state: cfg.State, cache: &caches{}, count: &counts{}, bgs: &backgroundState{}}
}

// Request says what to audit.
type Request struct {
	Env string
	// Revision forces the desired revision; empty means the one Argo CD synced, or the branch head.
	Revision string
	// renders keeps each unit's render (RenderGroup).
	renders bool
}

// Run audits one environment: every Application of its group (see group), or its one
// Application when it has no root Application.
func (a *Auditor) Run(ctx context.Context, req Request) (*drift.Report, error) {
	lap := a.stopwatch()
	// While kustomize renders (one core), list and watch the kinds every env has and fetch their
	// schema documents on the other: the audit then waits only for kinds the render adds.
	prefetched := make(chan struct{})
	go func() {
		defer close(prefetched)
		pctx, cancel := context.WithTimeout(ctx, a.SyncTimeout)
		defer cancel()
		prefetch(pctx, a.Live, a.Options.ExtraKinds)
	}()
	head, _ := a.Repo.Resolve("HEAD") // before the renders: a fetch meanwhile is a move for Update
	units, err := a.prepareGroup(ctx, req, lap)
	<-prefetched
	if err != nil {
		return nil, err
	}
	declared := a.declaredBy(units)
	ex := drift.NewExcusals()
	away, heads := a.awayOf(units, head)
	units = slices.DeleteFunc(units, func(p *prepared) bool { return p.elsewhere })
	for _, p := range units {
		if p.err != nil {
			continue
		}
		if err := a.compare(ctx, req, p, declared, ex, lap); err != nil {
			if p.main || !p.group {
				return nil, err
			}
			p.err = unreachable(p, err) // this Application is not audited; the others are
		}
	}
	if ctx.Err() != nil { // cancelled: nothing of this audit is a verdict
		return nil, ctx.Err()
	}
	rep := a.merge(req.Env, units, ex)
	if req.Revision == "" {
		a.keepGroup(req.Env, units, away, heads, ex)
		a.count.runs.Add(1)
	}
	return rep, nil
}

// declaresNoApplications says whether Argo CD's own comparison of app, at the revision it synced
// and of the source it renders, lists resources and no Application or ApplicationSet among them:
// its render adds no member to the group. Without such a comparison (not reconciled yet, a
// comparison error, another revision or source compared, several sources) it may, and is rendered.
func declaresNoApplications(app *argocd.App) bool {
	if app == nil || app.Status == nil || app.Status.Error != "" || len(app.Sources) > 0 || len(app.Status.Resources) == 0 ||
		app.Status.Revision == "" || app.Status.Revision != app.SyncedRevision || !app.ComparedItsSource() {
		return false
	}
	for key := range app.Status.Resources {
		if strings.HasPrefix(key, argocd.ApplicationGVK.Group+"/"+argocd.ApplicationGVK.Kind+"/") ||
			strings.HasPrefix(key, ApplicationSetGVK.Group+"/"+ApplicationSetGVK.Kind+"/") {
			return false
		}
	}
	return true
}

// unreachable names the cluster in the error of an Application on another cluster when that
// cluster did not answer (a refused or broken connection, a timeout, an API server that is not
// serving): the same words the fleet uses once its probes agree, so the first audit after an
// outage already says "cluster X unreachable" rather than the transport's error alone.
func unreachable(u *prepared, err error) error {
	if u.cluster == nil || !transportError(err) {
		return err
	}
	return &unitError{msg: fmt.Sprintf("Application %s: cluster %s unreachable: %v", u.name, u.clusterName, err)}
}

// transportError says err is a connection the cluster's API server did not take or broke off
// (refused, reset, ended early): not an answer about the request, not a timeout (which a cache
// that never synced also gives, when the auditor may not list a kind), not a credential or
// certificate that failed, not an aggregated API that is down while the cluster serves.
func transportError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || utilnet.IsProbableEOF(err)
}

// prepare reads a unit's Application, picks its revision, renders it and scopes the render:
// everything before the comparison.
func (a *Auditor) prepare(ctx context.Context, req Request, u *prepared, lap func(string)) error {
	if u.app == nil && u.git == nil {
		app, err := a.application(ctx, u.appNS, u.name)
		if err != nil {
			return err
		}
		u.app = app
	}
	u.live = u.app != nil
	app := u.app
	if u.git != nil {
		app = u.app.WithGitSpec(u.git)
		u.app = app
	}
	if app != nil && app.ControlPlaneNamespace != a.AppNamespace {
		app = app.WithControlPlane(a.AppNamespace) // for $ARGOCD_APP_NAME (App.InstanceName)
		u.app = app
	}
	if err := a.destination(ctx, u, app); err != nil {
		return err
	}
	if u.elsewhere && (u.clusterName != "" || declaresNoApplications(app)) {
		// Audited by the replica that owns its cluster; not rendered here. One on Argo CD's
		// own cluster is rendered only for the Applications it may declare.
		return nil
	}
	res, err := a.renderer().renderUnit(ctx, req, u, app, lap)
	if err != nil {
		return err
	}
	return a.index(ctx, u, app, res, lap, req.renders)
}

// index scopes a unit's render: its objects indexed, their kinds, the Unknown ones and hooks.
func (a *Auditor) index(ctx context.Context, u *prepared, app *argocd.App, res *render.Result, lap func(string), keep bool) error {
	var err error
	if keep {
		u.rendered = res
	}
	lap("render")
	destNS := "default" // where Argo CD places a namespaced object without one, with no destination namespace
	if app != nil && app.DestinationNamespace != "" {
		destNS = app.DestinationNamespace
	}
	// The render is held as JSON, each object decoded only while it is scoped, compared or
	// diffed: a 10,000-object render held decoded through the audit cost ~40 MB of heap beside
	// the live cache and Argo CD's diff.
	if u.self != nil {
		if res, err = withObjects(res, u.self); err != nil {
			return err
		}
	}
	if res, err = a.withGenerated(ctx, u, res, destNS); err != nil {
		return err
	}
	u.idx, u.kinds, u.unknown, u.hooks, err = a.scope(u.on(a), res, destNS)
	return err
}

// compare brings the live cache up for a prepared unit's kinds and compares: its report.
func (a *Auditor) compare(ctx context.Context, req Request, u *prepared, declared map[clusterRef]string, ex *drift.Excusals, lap func(string)) error {
	wctx, cancel := context.WithTimeout(ctx, a.SyncTimeout)
	err := u.on(a).Watch(wctx, u.kinds, a.Options.ExtraKinds)
	cancel()
	if err != nil {
		return fmt.Errorf("%s: %w", req.Env, err)
	}
	lap("live")
	opts := a.Options
	opts.Controllers = a.controllers(req.Env)
	if opts.Schema, err = a.schemaFor(ctx, u.on(a), u.kinds); err != nil {
		return fmt.Errorf("%s: %w", req.Env, err)
	}
	app := u.app
	if app != nil {
		if u.overrides, err = a.overrides(ctx); err != nil {
			return err
		}
		if opts.Normalizer, err = app.Normalizer(u.overrides); err != nil {
			return err
		}
	}
	if err := u.generatedOptions(&opts); err != nil {
		return fmt.Errorf("Application %s: %w", u.name, err)
	}
	lap("schema")
	opts.Application = u.instance(a)
	opts.Cluster = u.clusterName
	opts.Hooks = u.hooks
	opts.Excused = ex
	opts.Events = a.events(u.on(a), u.clusterName)
	if u.group {
		opts.ExtraOnlyIn = map[string][]schema.GroupKind{a.AppNamespace: argoKinds}
		name := u.ref(a)
		opts.DeclaredElsewhere = func(r drift.Ref) bool {
			owner, ok := declared[clusterRef{u.clusterName, r}]
			return ok && owner != name
		}
	}
	objs := append(drift.AuditIndex(u.idx, u.on(a), opts), u.unknown...)
	drift.SortObjects(objs)
	// The unit's report goes by its key until the group's is merged: the verdict memo and the
	// objects only Argo CD flagged are kept per unit.
	rep := &drift.Report{Env: u.key, Revision: u.desired, Objects: objs}
	lap("compare")
	if app != nil {
		if err := a.argoVerdicts(ctx, u.on(a), app, u.idx, u.withoutGenerated(u.idx.Refs()), u.overrides, &opts, rep); err != nil {
			return err
		}
		u.generatedVerdicts(rep.Objects)
		a.memo(u.key).Done()
		lap("argocd")
	}
	a.attribute(u.on(a), u.clusterName, rep.Objects, &opts)
	if app != nil && req.Revision == "" && (app.InProgress() || app.Failed()) {
		rep.Operation = &drift.Operation{Phase: app.Operation.Phase, Revision: app.Operation.Revision, Message: app.Operation.Message}
	}
	u.opts, u.report = opts, rep
	return nil
}

// unitRenderer renders one unit's Application as Argo CD does: Argo CD's repo-server
// (byRepoServer) or the in-process engine (inProcess). Config.RepoServer picks one (renderer);
// nothing else chooses.
type unitRenderer interface {
	renderUnit(ctx context.Context, req Request, u *prepared, app *argocd.App, lap func(string)) (*render.Result, error)
}

// renderer is the Auditor's unitRenderer.
func (a *Auditor) renderer() unitRenderer {
	if a.RepoServer != nil {
		return byRepoServer{a}
	}
	return inProcess{a}
}

// byRepoServer asks Argo CD's repo-server (askRepoServer). An env without an Application of its
// own has nothing to ask it for: it is rendered in process.
type byRepoServer struct{ a *Auditor }

func (r byRepoServer) renderUnit(ctx context.Context, req Request, u *prepared, app *argocd.App, lap func(string)) (*render.Result, error) {
	if app == nil {
		return inProcess(r).renderUnit(ctx, req, u, app, lap)
	}
	u.renderedBy = RenderedByRepoServer
	res, err := r.a.askRepoServer(ctx, req, u, app)
	if errors.Is(err, reposerver.ErrUnreachable) && app.Unrenderable == "" {
		// Argo CD's repo-server down or unreachable: the engine in process renders what it can,
		// saying so, rather than leave the Application unaudited.
		own, ownErr := inProcess(r).renderUnit(ctx, req, u, app, lap)
		if ownErr == nil {
			u.renderedBy = RenderedInProcess + " (repo-server unreachable: " + err.Error() + ")"
			return own, nil
		}
		return nil, &unitError{msg: fmt.Sprintf("%v; rendered in process instead: %v", err, ownErr), cause: err}
	}
	return res, err
}

// inProcess renders with the engine in this process, as Argo CD's repo-server would: a chart
// of a chart repository, several sources, or one source of Git at the unit's revision with the
// Application's options and .argocd-source files.
type inProcess struct{ a *Auditor }

func (r inProcess) renderUnit(ctx context.Context, req Request, u *prepared, app *argocd.App, lap func(string)) (*render.Result, error) {
	a := r.a
	u.renderedBy = RenderedInProcess
	if u.group && app != nil && app.Unrenderable != "" { // alone, an env renders its overlay's source
		return nil, &unitError{msg: fmt.Sprintf("Application %s: the auditor cannot render %s yet", u.name, app.Unrenderable)}
	}
	var err error
	if app != nil && app.Chart != "" && len(app.Sources) == 0 {
		return a.renderChart(ctx, u, app, req)
	}
	if u.desired, u.head, u.pending, err = a.revisions(app, req); err != nil {
		return nil, err
	}
	if app != nil {
		// What Argo CD merges into the source before it renders: .argocd-source*.yaml.
		if app, err = app.WithOverrides(func(rev, name string) ([]byte, error) {
			if rev == "" || req.Revision != "" {
				rev = u.desired
			}
			return a.Repo.ReadFile(rev, name)
		}); err != nil {
			return nil, &unitError{msg: fmt.Sprintf("Application %s: %v", u.name, err)}
		}
		u.app = app
		if err := app.TypeError(); err != nil {
			return nil, &unitError{msg: fmt.Sprintf("Application %s: %v (Argo CD refuses to render it)", u.name, err)}
		}
		if u.group && app.Unrenderable != "" {
			return nil, &unitError{msg: fmt.Sprintf("Application %s: the auditor cannot render %s yet", u.name, app.Unrenderable)}
		}
	}
	lap("git")
	if app != nil && len(app.Sources) > 1 {
		return a.renderSources(ctx, u, app, req)
	}
	return r.renderSource(ctx, req, u, app)
}

// renderSource renders the one source of u's Application (or the env's overlay, without one)
// at u's revision with the Application's options; the env's own render is left to the
// background when the audit allows it.
func (r inProcess) renderSource(ctx context.Context, req Request, u *prepared, app *argocd.App) (*render.Result, error) {
	a := r.a
	patches, err := a.patches(app, req.Env)
	if err != nil {
		return nil, err
	}
	v := render.Variant{Patches: patches}
	if v.Helm, err = a.helmOptions(u.on(a), app, u.target, u.desired); err != nil {
		return nil, err
	}
	if app != nil {
		if v.Kustomize, err = app.KustomizeOptions(u.desired); err != nil {
			return nil, fmt.Errorf("Application %s: %w", u.name, err)
		}
		if v.Directory = app.DirectoryOptions(u.desired); v.Directory != nil {
			v.Helm = nil // a directory source, whatever its path holds
		}
	}
	switch {
	case v.Helm != nil:
		u.renderedAs = renderedChart
	case v.Kustomize != nil && !reflect.DeepEqual(*v.Kustomize, render.KustomizeOptions{}):
		u.renderedAs = renderedWithOptions // names, images, labels: an overlay patch may not reach them
	}
	var targets targetRenderer = a.foreground()
	if u.main && u.target == req.Env && a.background(req) {
		targets = a.behind() // the env's own render may take minutes: its last report stands meanwhile
	}
	return targets.renderTarget(ctx, u.key, u.target, u.desired, v)
}
