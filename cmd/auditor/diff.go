package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/llm-gitops/platform/internal/argocd"
	"github.com/llm-gitops/platform/internal/audit"
	"github.com/llm-gitops/platform/internal/auditlog"
	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/live"
	"github.com/llm-gitops/platform/internal/render"
	"github.com/llm-gitops/platform/internal/report"
)

// kubeFlags are kubectl's connection flags.
type kubeFlags struct {
	kubeconfig, context string
}

func (f *kubeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&f.context, "context", "", "kubeconfig context to use")
}

func (f *kubeFlags) config() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}

type diffOptions struct {
	src          sourceFlags
	kube         kubeFlags
	env, output  string
	appNamespace string
	applier      string
	cacheDir     string
	auditLog     string
	timings      bool
	timeout      time.Duration
}

func newDiffCommand() *cobra.Command {
	o := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff --env ENV [--repo DIR|URL] [--revision REV] [--kubeconfig F] [--context C] [-o text|json]",
		Short: "Compare what Git says with what runs; name every drifted field and who changed it",
		Long: `diff renders the revision Argo CD synced (the Application's status.sync.revision; the branch
head without one), compares it with the live objects field by field, and names the field manager,
operation, subresource and time of every drifted field. Git ahead of the synced revision is
reported as a pending sync, not as drift.

-o patch prints instead the change that adopts the live state into overlays/<env>/: one
strategic-merge patch file per drifted object, listed in the overlay's kustomization, as a diff
that git apply accepts on the audited revision. What it cannot adopt (Secrets, missing and extra
objects, list items addressed by position) is named on stderr.

Exit codes: 0 in sync, 1 drift, >1 error.`,
		Example: `  auditor diff --env prod
  auditor diff --env prod --repo file:///srv/git/platform.git -o json
  auditor diff --env prod -o patch | git apply   # make Git say what runs`,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), cmd.OutOrStdout()) },
	}
	cmd.Flags().StringVar(&o.env, "env", "", "environment (a directory under overlays/)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "output format: text, json, or patch (the adopt-into-Git patch, for `git apply` at the audited revision)")
	cmd.Flags().StringVar(&o.appNamespace, "app-namespace", "argocd", "namespace of the Argo CD Applications")
	cmd.Flags().StringVar(&o.applier, "applier", "argocd-controller", "field manager of the GitOps sync")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
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

func (o *diffOptions) run(ctx context.Context, w io.Writer) error {
	if o.env == "" {
		return &exitError{code: 2, err: fmt.Errorf("--env is required")}
	}
	if o.output != "text" && o.output != "json" && o.output != "patch" {
		return &exitError{code: 2, err: fmt.Errorf("unknown output format %q (want text, json or patch)", o.output)}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	cfg, err := o.kube.config()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	repo, err := gitOpts.open(ctx, o.src.repo)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	cache, err := live.New(ctx, cfg)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	a := audit.New(repo, cache)
	a.AppNamespace = o.appNamespace
	a.Options.Applier = o.applier
	if o.auditLog != "" {
		a.People = auditlog.NewStore(0)
		if err := (auditlog.File{Path: o.auditLog}).Load(ctx, a.People); err != nil {
			return &exitError{code: 2, err: err}
		}
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
	var stages []string
	if o.timings {
		a.Timing = func(stage string, took time.Duration) {
			stages = append(stages, fmt.Sprintf("%s=%.3fs", stage, took.Seconds()))
		}
		defer func() { fmt.Fprintln(os.Stderr, "timings:", strings.Join(stages, " ")) }()
	}
	rep, err := a.Run(ctx, audit.Request{Env: o.env, Revision: o.src.revision})
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	switch o.output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return &exitError{code: 2, err: err}
		}
	case "patch":
		if err := writeAdoptPatch(w, os.Stderr, repo, rep); err != nil {
			return &exitError{code: 2, err: err}
		}
	default:
		writeText(w, rep, time.Now())
	}
	if !rep.InSync {
		return &exitError{code: 1, err: fmt.Errorf("drift")}
	}
	return nil
}

// writeAdoptPatch prints the patch adopting every drifted field it can express into
// overlays/<env>/, written against the audited revision, and names on errw what it leaves out.
func writeAdoptPatch(w, errw io.Writer, repo *gitrepo.Repo, rep *drift.Report) error {
	var objs []drift.Object
	for _, o := range rep.Objects {
		id := o.Kind + " " + o.Name
		if o.Namespace != "" {
			id = o.Kind + " " + o.Namespace + "/" + o.Name
		}
		switch {
		case o.Status == drift.Missing:
			fmt.Fprintf(errw, "not adopted: %s: missing from the cluster (delete it from Git, or sync it)\n", id)
		case o.Status == drift.Extra:
			fmt.Fprintf(errw, "not adopted: %s: not in Git (export it into overlays/%s/ and list it under resources:)\n", id, rep.Env)
		case o.Status != drift.Modified || len(o.Fields) == 0:
			fmt.Fprintf(errw, "not adopted: %s: no field to adopt (%s)\n", id, o.Status)
		case o.Kind == "Secret":
			fmt.Fprintf(errw, "not adopted: %s: values of a Secret are never shown (re-encrypt the live value with your secrets workflow)\n", id)
		default:
			objs = append(objs, o)
		}
	}
	if len(objs) == 0 {
		return nil
	}
	a, err := report.AdoptPatch(rep.Env, func(name string) ([]byte, error) { return repo.ReadFile(rep.Revision, name) }, objs...)
	if err != nil {
		return err
	}
	for _, n := range a.Notes {
		fmt.Fprintln(errw, "not adopted: "+n)
	}
	_, err = io.WriteString(w, a.Diff)
	return err
}

// writeText prints one line per drifted field: object, path, desired → live, manager, how long ago.
func writeText(w io.Writer, rep *drift.Report, now time.Time) {
	fmt.Fprintf(w, "env %s, revision %.12s", rep.Env, rep.Revision)
	if rep.PendingSync {
		fmt.Fprintf(w, " (pending sync: Git is at %.12s)", rep.HeadRevision)
	}
	fmt.Fprintln(w)
	for _, o := range rep.Objects {
		id := o.Kind + " " + o.Name
		if o.Namespace != "" {
			id = o.Kind + " " + o.Namespace + "/" + o.Name
		}
		if o.ArgoCD != nil {
			id += argoLabel(o.ArgoCD)
		}
		switch o.Status {
		case drift.Missing:
			by := ""
			if o.Actor != nil {
				by = " — deleted by " + person(o.Actor) + " (" + o.Actor.Verb + " " + o.Actor.Time + ")"
			}
			fmt.Fprintf(w, "%-8s %s: in Git, not in the cluster%s\n", o.Status, id, by)
		case drift.Extra:
			by := ""
			switch {
			case o.Creator != nil && o.Actor != nil:
				by = " — created by " + person(o.Actor) + " with " + who(o.Creator.Manager, o.Creator.Operation, o.Creator.Subresource, o.Creator.Time, now)
			case o.Creator != nil:
				by = " — created by " + who(o.Creator.Manager, o.Creator.Operation, o.Creator.Subresource, o.Creator.Time, now)
			case o.Actor != nil:
				by = " — created by " + person(o.Actor) + " (" + o.Actor.Verb + " " + o.Actor.Time + ")"
			}
			fmt.Fprintf(w, "%-8s %s: in the cluster, not in Git%s\n", o.Status, id, by)
		case drift.Unknown:
			fmt.Fprintf(w, "%-8s %s: not compared — %s\n", o.Status, id, o.Note)
		default:
			fmt.Fprintf(w, "%-8s %s\n", o.Status, id)
			if o.Note != "" {
				fmt.Fprintf(w, "           %s\n", o.Note)
			}
			if o.Schema != "" {
				fmt.Fprintf(w, "           compared without the cluster's schema (%s)\n", o.Schema)
			}
			for _, f := range o.Fields {
				by := who(f.Manager, f.Operation, f.Subresource, f.Time, now)
				if f.Actor != nil {
					by = person(f.Actor) + " with " + by
					if f.Manager == "" {
						by = person(f.Actor) + " (" + f.Actor.Verb + " " + f.Actor.Time + ")"
					}
				}
				fmt.Fprintf(w, "           %-50s %s  %s → %s  by %s\n", f.Path, f.Change, short(f.Desired), short(f.Live), by)
			}
		}
	}
	for _, a := range rep.ArgoCDOnly {
		fmt.Fprintf(w, "argo-cd  %s %s/%s: OutOfSync for Argo CD only — %s\n", a.Kind, a.Namespace, a.Name, a.Note)
	}
	n, f := rep.Counts()
	if n == 0 {
		fmt.Fprintln(w, "in sync: no drift")
		return
	}
	fmt.Fprintf(w, "%d objects drifted, %d fields\n", n, f)
}

// person names an actor from the audit log: the user, and whom they acted as (kubectl --as).
func person(a *drift.Actor) string {
	if a.ImpersonatedUser != "" {
		return a.User + " (as " + a.ImpersonatedUser + ")"
	}
	return a.User
}

func who(manager, op, sub, t string, now time.Time) string {
	if manager == "" {
		return "unknown writer (a removal leaves no managedFields entry, and no watch saw it happen)"
	}
	s := manager + " (" + op
	if sub != "" {
		s += ", subresource " + sub
	}
	s += ")"
	if ts, err := time.Parse(time.RFC3339, t); err == nil {
		s += " " + ago(now.Sub(ts)) + " ago"
	}
	return s
}

func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

func short(v any) string {
	if v == nil {
		return "(none)"
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	default:
		b, _ := json.Marshal(x)
		s = string(b)
	}
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

func argoLabel(v *drift.ArgoVerdict) string {
	state := "Synced"
	if v.OutOfSync {
		state = "OutOfSync"
	}
	if v.Note != "" {
		return "  [Argo CD: " + state + "; " + v.Note + "]"
	}
	return "  [Argo CD: " + state + "]"
}
