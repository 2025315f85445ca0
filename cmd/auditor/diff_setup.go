package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/audit"
	"github.com/llm-gitops/platform/internal/auditlog"
	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/live"
	"github.com/llm-gitops/platform/internal/render"
	"github.com/llm-gitops/platform/internal/reposerver"
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
func (o *diffOptions) auditor(ctx context.Context) (*gitrepo.Repo, *audit.Auditor, error) {
	repo, err := gitOpts.open(ctx, o.src.repo)
	if err != nil {
		return nil, nil, err
	}
	if err := checkRepoEnvs(repo, o.src.revision, o.env); err != nil {
		return nil, nil, err
	}
	cfg, err := o.kube.config()
	if err != nil {
		return nil, nil, err
	}
	cache, err := live.New(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	a := audit.New(repo, cache)
	a.AppNamespace = o.appNamespace
	if o.repoServer.Address != "" {
		if a.RepoServer, err = reposerver.New(o.repoServer); err != nil {
			return nil, nil, err
		}
	}
	if src, err := render.AtRevision(repo, "HEAD"); err == nil {
		a.Envs, _ = src.Envs() // the other envs' roots in the cluster are theirs, not Extra
	}
	a.Options.Applier = o.applier
	if a.People, err = loadAuditLog(ctx, o.auditLog); err != nil {
		return nil, nil, err
	}
	a.Renders, a.Verdicts = nil, nil
	if o.cacheDir != "off" && o.cacheDir != "" {
		a.Renders = render.NewCache(filepath.Join(o.cacheDir, "render"), 4)
		// Secret values stand as HMACs under this user's install key, comparable across runs.
		if key, err := drift.InstallKey(filepath.Join(o.cacheDir, "secret-hmac.key")); err == nil {
			a.Options.SecretKey = key
		}
		// Per cluster and env: two clusters' verdicts never share a file.
		cluster := sha256.Sum256([]byte(cfg.Host))
		a.Verdicts = argocd.MemoPerEnv(func(env string) string {
			return filepath.Join(o.cacheDir, "verdicts", hex.EncodeToString(cluster[:8])+"-"+env+".json")
		})
	}
	return repo, a, nil
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
