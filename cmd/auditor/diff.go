package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/audit"
	"github.com/llm-gitops/platform/internal/auditlog"
	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/live"
	"github.com/llm-gitops/platform/internal/render"
	"github.com/llm-gitops/platform/internal/reposerver"
)

// diffOptions are the flags of `auditor diff`.
type diffOptions struct {
	src          sourceFlags
	kube         kubeFlags
	env, output  string
	app, root    string
	all          bool
	appNamespace string
	applier      string
	cacheDir     string
	auditLog     string
	timings      bool
	timeout      time.Duration
	repoServer   reposerver.Config
}

func newDiffCommand() *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff (--env ENV | --all) [--app NAME] [--repo DIR|URL] [--revision REV] [--kubeconfig F] [--context C] [-o text|json]",
		Short: "Compare what Git says with what runs; name every drifted field and who changed it",
		Long: `diff renders the revision Argo CD synced (the Application's status.sync.revision; the branch
head without one), compares it with the live objects field by field, and names the field manager,
operation, subresource and time of every drifted field. Git ahead of the synced revision is
reported as a pending sync, not as drift.

-o patch prints instead the change that adopts the live state into overlays/<env>/: one
strategic-merge patch file per drifted object, listed in the overlay's kustomization, as a diff
that git apply accepts on the audited revision. What it cannot adopt (Secrets, missing and extra
objects, list items addressed by position) is named on stderr.

With the env's root Application (root-<env>) in the cluster, every Application under it is
audited, the Applications themselves included; --app NAME reports one of them. --all audits every
env of the repository (-o json: a list of reports).

Exit codes: 0 in sync, 1 drift, >1 error.`,
		Example: `  auditor diff --env prod
  auditor diff --all -o json
  auditor diff --env prod --app llm-policies
  auditor diff --env prod --repo file:///srv/git/platform.git -o json
  auditor diff --env prod -o patch | git apply   # make Git say what runs`,
		RunE: runE(o),
	}
	addEnvFlag(cmd, &o.env, "env", "environment (a directory under overlays/)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text, json, or patch (the adopt-into-Git patch, for `git apply` at the audited revision)")
	cmd.Flags().StringVar(&o.appNamespace, "app-namespace", "argocd", "namespace of the Argo CD Applications")
	cmd.Flags().StringVar(&o.app, "app", "", "report only this Application of the env's group")
	cmd.Flags().BoolVar(&o.all, "all", false, "audit every env of the repository (the directories under overlays/)")
	cmd.Flags().StringVar(&o.root, "root", "", "the env's root Application (app-of-apps; default root-<env>): with it in the cluster, every Application under it is audited")
	cmd.Flags().StringVar(&o.applier, "applier", "argocd-controller", "field manager of the GitOps sync")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	cmd.Flags().StringVar(&o.repoServer.Address, "repo-server", "", "render each Application by Argo CD's repo-server at this host:port, as its controller asks it (default: render in process)")
	cmd.Flags().BoolVar(&o.repoServer.Plaintext, "repo-server-plaintext", false, "talk to the repo-server without TLS")
	cmd.Flags().BoolVar(&o.repoServer.StrictTLS, "repo-server-strict-tls", false, "verify the repo-server's certificate (against --repo-server-ca)")
	cmd.Flags().StringVar(&o.repoServer.CAFile, "repo-server-ca", "", "CA certificate of the repo-server (ca.crt of the argocd-repo-server-tls Secret)")
	cmd.Flags().BoolVar(&o.timings, "timings", false, "print how long each stage took (git, render, live, schema, compare, argocd) to stderr")
	cmd.Flags().StringVar(&o.auditLog, "audit-log", "", "the API server's audit log (JSON lines, --audit-log-path): name the person behind each drifted field")
	cmd.Flags().StringVar(&o.cacheDir, "cache-dir", defaultCacheDir(), `directory caching renders (by the content they read) and Argo CD's in-sync verdicts (by the objects compared); "off": none`)
	o.src.add(cmd)
	o.kube.add(cmd)
	return cmd
}

// defaultCacheDir is the auditor's directory in the user's cache directory, "off" when there is none.
func defaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "off"
	}
	return filepath.Join(dir, "llm-auditor")
}

// Complete has nothing to fill.
func (o *diffOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate rejects a missing --env and a bad -o.
func (o *diffOptions) Validate() error {
	switch {
	case o.env == "" && !o.all:
		return usageErr("--env or --all is required")
	case o.env != "" && o.all:
		return usageErr("--env and --all exclude each other")
	case o.all && o.output == "patch":
		return usageErr("-o patch adopts one env: use --env")
	}
	if o.output != "text" && o.output != "json" && o.output != "patch" {
		return usageErr("unknown output format %q (want text, json or patch)", o.output)
	}
	return nil
}

// Run audits the env and prints the drift; exit code 1 when there is some.
func (o *diffOptions) Run(ctx context.Context, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	repo, a, err := o.auditor(ctx)
	if err != nil {
		return failed(err)
	}
	var stages []string
	if o.timings {
		a.Timing = func(stage string, took time.Duration) {
			stages = append(stages, fmt.Sprintf("%s=%.3fs", stage, took.Seconds()))
		}
		defer func() { fmt.Fprintln(os.Stderr, "timings:", strings.Join(stages, " ")) }()
	}
	if o.root != "" {
		a.RootName = func(string) string { return o.root }
	}
	if o.all {
		return o.runAll(ctx, w, a)
	}
	rep, err := a.Run(ctx, audit.Request{Env: o.env, Revision: o.src.revision})
	if err != nil {
		return failed(err)
	}
	if o.app != "" {
		if rep, err = onlyApplication(rep, o.app); err != nil {
			return err
		}
	}
	switch o.output {
	case "json":
		if err := writeJSON(w, rep); err != nil {
			return failed(err)
		}
	case "patch":
		if err := writeAdoptPatch(w, os.Stderr, repo, rep); err != nil {
			return failed(err)
		}
	default:
		writeText(w, rep, time.Now())
	}
	if !rep.InSync {
		return found("drift")
	}
	return nil
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

// onlyApplication narrows a report to one Application of the env's group: its objects, its
// entry. An Application the group does not have is a usage error naming those it has.
func onlyApplication(rep *drift.Report, name string) (*drift.Report, error) {
	var names []string
	for _, app := range rep.Applications {
		names = append(names, app.Name)
		if app.Name != name {
			continue
		}
		out := *rep
		out.Applications = []drift.Application{app}
		out.Objects = []drift.Object{}
		kept := map[drift.Ref]bool{}
		for _, o := range rep.Objects {
			if o.Application == name {
				out.Objects = append(out.Objects, o)
				kept[drift.RefOfObject(&o)] = true
			}
		}
		out.ArgoCDOnly = nil
		for _, o := range rep.ArgoCDOnly {
			if kept[drift.RefOfObject(&drift.Object{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name})] {
				out.ArgoCDOnly = append(out.ArgoCDOnly, o)
			}
		}
		if app.Revision != "" && app.Revision != rep.Revision {
			out.Revision, out.PendingSync, out.HeadRevision, out.Operation = app.Revision, false, "", nil
		}
		out.InSync = len(out.Objects) == 0
		if app.Error != "" {
			return nil, failed(fmt.Errorf("Application %s: %s", name, app.Error))
		}
		return &out, nil
	}
	return nil, usageErr("env %s has no Application %s (its Applications: %s)", rep.Env, name, strings.Join(names, ", "))
}

// runAll audits every env of the repository, one report each; with --app, only the env whose
// group has that Application. An env that cannot be audited is named on stderr and the others
// are audited.
func (o *diffOptions) runAll(ctx context.Context, w io.Writer, a *audit.Auditor) error {
	if len(a.Envs) == 0 {
		return failed(fmt.Errorf("the repository has no envs (directories under overlays/ with a kustomization)"))
	}
	reps := []*drift.Report{}
	var errs []error
	for _, env := range a.Envs {
		rep, err := a.Run(ctx, audit.Request{Env: env, Revision: o.src.revision})
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", env, err)
			errs = append(errs, fmt.Errorf("%s: %w", env, err))
			continue
		}
		if o.app != "" {
			if !hasApplication(rep, o.app) {
				continue // not this env's
			}
			if rep, err = onlyApplication(rep, o.app); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
				continue
			}
		}
		reps = append(reps, rep)
	}
	if o.app != "" && len(reps) == 0 && len(errs) == 0 {
		return usageErr("no env has an Application %s", o.app)
	}
	if o.output == "json" {
		if err := writeJSON(w, reps); err != nil {
			return failed(err)
		}
	} else {
		for i, rep := range reps {
			if i > 0 {
				fmt.Fprintln(w)
			}
			writeText(w, rep, time.Now())
		}
	}
	if len(errs) > 0 {
		return failed(errors.Join(errs...))
	}
	for _, rep := range reps {
		if !rep.InSync {
			return found("drift")
		}
	}
	return nil
}

// hasApplication says whether the env's group has the Application.
func hasApplication(rep *drift.Report, name string) bool {
	return slices.ContainsFunc(rep.Applications, func(a drift.Application) bool { return a.Name == name })
}
