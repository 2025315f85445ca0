package main

import (
	"context"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/site"
)

// siteSetOptions are the flags of `auditor site set`.
type siteSetOptions struct {
	repo, env, output string
	pairs             map[string]string
}

func newSiteSetCommand() *cobra.Command {
	o := &siteSetOptions{}
	cmd := &cobra.Command{
		Use:   "set --env ENV KEY=VALUE... [--repo DIR] [-o text|json|yaml]",
		Short: "Write an env's site values into the work tree (review with git diff, then commit)",
		Long: `set writes KEY=VALUE pairs into overlays/<env>/site/site.yaml and removes its template mark,
so auditor check then fails on any example name left. It also writes what kustomize cannot
reach: the bootstrap Application's repoURL (clusters/<env>/root.yaml, for gitURL) and the
overlay's image names (newName in overlays/<env>/kustomization.yaml, for registry). Files are
edited as text: comments and order stay. Nothing is written when a key or value is invalid.
It then renders the env and lists the example names left. Nothing is committed.

Keys:
` + siteKeysHelp(),
		Example: `  auditor site set --env prod gitURL=https://git.acme.io/ml/platform.git domain=llm.acme.io
  auditor site set --env staging registry=ghcr.io/acme/ml && git diff`,
		RunE: runE(o),
	}
	addEnvFlag(cmd, &o.env, "env", "env (as the repository's .auditor.yaml names it, else a directory under overlays/)")
	addReportOutput(cmd, &o.output)
	addRepoFlag(cmd, &o.repo, "repository work tree to edit (a directory)")
	return cmd
}

// Complete reads the KEY=VALUE arguments.
func (o *siteSetOptions) Complete(_ *cobra.Command, args []string) error {
	o.pairs = map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return usageErr("%q is not KEY=VALUE (keys: %s)", a, strings.Join(site.Names(), ", "))
		}
		if _, dup := o.pairs[k]; dup {
			return usageErr("%s is given twice", k)
		}
		o.pairs[k] = v
	}
	return nil
}

// Validate wants an env, a work tree and at least one pair, each a known key with a valid value.
func (o *siteSetOptions) Validate() error {
	if o.env == "" {
		return usageErr("--env is required")
	}
	if gitrepo.IsURL(o.repo) {
		return usageErr("site set edits a work tree: --repo must be a directory, not %s", gitrepo.RedactURL(o.repo))
	}
	if len(o.pairs) == 0 {
		return usageErr("nothing to set: give KEY=VALUE pairs (keys: %s)", strings.Join(site.Names(), ", "))
	}
	for k, v := range o.pairs {
		key, ok := site.Lookup(k)
		if !ok {
			return usageErr("unknown site key %q (known: %s)", k, strings.Join(site.Names(), ", "))
		}
		if err := key.Check(v); err != nil {
			return usageErr("%v", err)
		}
	}
	return nil
}

// Run writes the values and reports what changed and what still carries an example.
func (o *siteSetOptions) Run(_ context.Context, w io.Writer) error {
	src, err := render.FromDir(o.repo)
	if err != nil {
		return failed(err)
	}
	known, err := src.Envs()
	if err != nil {
		return failed(err)
	}
	if err := checkEnvs(known, o.env); err != nil {
		return err
	}
	changes, err := site.Set(o.repo, o.env, o.pairs)
	if err != nil {
		return failed(err)
	}
	if src, err = render.FromDir(o.repo); err != nil {
		return failed(err)
	}
	rep, err := siteStatus(src, o.env)
	if err != nil {
		return err
	}
	rep.Changes = changes
	return writeSiteReport(w, o.output, rep)
}
