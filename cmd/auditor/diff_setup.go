package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/llm-gitops/platform/internal/daemon/fleet"
	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/engine/reposerver"
	"github.com/llm-gitops/platform/internal/platform/cost"
)

// defaultCacheDir is the auditor's directory in the user's cache directory, "off" when there is none.
func defaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "off"
	}
	return filepath.Join(dir, "llm-auditor")
}

// auditor opens the repository and the cluster and sets up the audit the flags ask for.
func (o *diffOptions) auditor(ctx context.Context, timing func(stage string, took time.Duration)) (*gitrepo.Repo, *audit.Auditor, error) {
	repo, err := gitOpts.open(ctx, o.src.repo)
	if err != nil {
		return nil, nil, err
	}
	l, err := o.layout(repo)
	if err != nil {
		return nil, nil, err
	}
	appNamespace := o.appNamespace
	if o.src.cmd != nil && !argocdNamespaceSet(o.src.cmd) {
		// The env's namespace, as the layout says; with --all, the one every env is in.
		var only []string
		if !o.all {
			only = []string{o.env}
		}
		ns, err := audit.LayoutNamespace(l, only)
		if err != nil {
			return nil, nil, usageErr("%v: audit each with --env", err)
		}
		if ns != "" {
			appNamespace = ns
		}
	}
	cfg, err := o.kube.config()
	if err != nil {
		return nil, nil, err
	}
	cache, err := live.New(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	people, err := loadAuditLog(ctx, o.auditLog)
	if err != nil {
		return nil, nil, err
	}
	if people != nil { // a write argocd-server made names the Argo CD user its record names
		if cs, err := kubernetes.NewForConfig(cfg); err == nil {
			if err := auditlog.LoadArgoCD(ctx, cs, appNamespace, people); err != nil {
				fmt.Fprintf(os.Stderr, "warning: %v: writes through argocd-server name its ServiceAccount\n", err)
			}
		}
	}
	c := audit.Config{Repo: repo, Live: cache, AppNamespace: appNamespace, People: people, Steps: []drift.Step{cost.Step{}}, Timing: timing}
	// An Application on another cluster is read through the kubeconfig context that reaches it.
	if fl, err := fleet.FromKubeconfig(ctx, o.kube.rules(), cfg.Host); err == nil {
		c.Clusters = fl.Resolve
	}
	if o.repoServer.Address != "" {
		if c.RepoServer, err = reposerver.New(o.repoServer); err != nil {
			return nil, nil, err
		}
	}
	// The other envs' roots in the cluster are theirs, not Extra.
	audit.UseLayout(&c, l)
	if gitrepo.IsURL(o.src.repo) {
		c.RepoURL = o.src.repo
	}
	var key []byte
	if o.cacheDir != "off" && o.cacheDir != "" {
		c.Renders = render.NewCache(filepath.Join(o.cacheDir, "render"), 4)
		// Secret values stand as HMACs under this user's install key, comparable across runs.
		key, _ = drift.InstallKey(filepath.Join(o.cacheDir, "secret-hmac.key"))
		// Per cluster and env: two clusters' verdicts never share a file.
		cluster := sha256.Sum256([]byte(cfg.Host))
		c.Verdicts = argocd.MemoPerEnv(func(env string) string {
			return filepath.Join(o.cacheDir, "verdicts", hex.EncodeToString(cluster[:8])+"-"+env+".json")
		})
	}
	c.Drift = func(opts *drift.Options) {
		opts.Applier = o.applier
		if key != nil {
			opts.SecretKey = key
		}
	}
	a := audit.New(c)
	return repo, a, nil
}

// layout is the repository's layout (at --revision, else HEAD) with the env the flags name:
// --root, --project and --selector name its Applications, whether or not the layout lists it.
// An env neither the layout nor those flags name is a usage error listing the envs.
func (o *diffOptions) layout(repo *gitrepo.Repo) (*layout.Layout, error) {
	l, err := repoLayout(repo, o.src.revision)
	if err != nil {
		return nil, err
	}
	if o.root == "" && o.selector == "" && len(o.projects) == 0 {
		return l, checkEnvs(l.Names(), o.env)
	}
	i := slices.IndexFunc(l.Envs, func(e layout.Env) bool { return e.Name == o.env })
	if i < 0 {
		l.Envs = append(l.Envs, layout.Env{Name: o.env, Namespace: o.appNamespace})
		i = len(l.Envs) - 1
	}
	e := &l.Envs[i]
	if o.root != "" && o.root != e.Root {
		e.Root, e.RootManifest, e.Apps = o.root, "", "" // Git's manifest of another root is not this one's
	}
	if o.selector != "" || len(o.projects) > 0 {
		e.Selector, e.Projects = o.selector, o.projects
	}
	return l, nil
}

// loadAuditLog reads the API server's audit log at path into a new store; none without a path.
func loadAuditLog(ctx context.Context, path string) (*auditlog.Store, error) {
	if path == "" {
		return nil, nil
	}
	people := auditlog.NewStore(0)
	if err := (auditlog.File{Path: path}).Load(ctx, people); err != nil {
		return nil, err
	}
	return people, nil
}
