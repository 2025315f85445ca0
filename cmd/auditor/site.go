package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/gitrepo"
	"github.com/llm-gitops/platform/internal/render"
	"github.com/llm-gitops/platform/internal/site"
)

func newSiteCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "site (show|set) [flags]",
		Short: "A site's values: the Git URL, domain, registry, issuer and the rest, set in one place",
		Long: `site reads and writes an env's site values: the names that make the template one
organisation's platform. They live in overlays/<env>/site/site.yaml; components/site puts each
where the platform needs it. auditor check (rule site-values) fails staging and prod while what
they deploy still carries an example name once the file is no longer the template's.

Keys:
` + siteKeysHelp(),
		Args:          groupArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	flagErrorsExit2(cmd)
	cmd.AddCommand(newSiteShowCommand(), newSiteSetCommand())
	return cmd
}

func siteKeysHelp() string {
	var b strings.Builder
	for _, k := range site.Keys {
		fmt.Fprintf(&b, "  %-12s %s\n", k.Name, k.Help)
	}
	return b.String()
}

// siteReport is what `site show` and `site set` print: the env's values and the example names
// its render still carries.
type siteReport struct {
	Env      string            `json:"env"`
	File     string            `json:"file"`
	Template bool              `json:"template"`
	Values   map[string]string `json:"values"`
	Problems []string          `json:"problems,omitempty"`
	// Changes are what `site set` wrote.
	Changes []site.Change `json:"changes,omitempty"`
	// Examples are the example names the env's overlay and its Applications (apps/<env>) render.
	Examples []site.Found `json:"examples"`
}

// siteShowOptions are the flags of `auditor site show`.
type siteShowOptions struct {
	src         sourceFlags
	env, output string
}

func newSiteShowCommand() *cobra.Command {
	o := &siteShowOptions{}
	cmd := &cobra.Command{
		Use:   "show --env ENV [--repo DIR|URL] [--revision REV] [-o text|json|yaml]",
		Short: "Show an env's site values and the example names its render still carries",
		Example: `  auditor site show --env prod
  auditor site show --env staging --revision origin/main -o json`,
		Args: cobra.NoArgs,
		RunE: runE(o),
	}
	addEnvFlag(cmd, &o.env, "env", "environment (a directory under overlays/)")
	addReportOutput(cmd, &o.output)
	o.src.add(cmd)
	return cmd
}

// Complete has nothing to fill.
func (o *siteShowOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate wants an env.
func (o *siteShowOptions) Validate() error {
	if o.env == "" {
		return usageErr("--env is required")
	}
	return nil
}

// Run prints the env's values and what still carries an example.
func (o *siteShowOptions) Run(_ context.Context, w io.Writer) error {
	src, err := o.src.open()
	if err != nil {
		return failed(err)
	}
	rep, err := siteStatus(src, o.env)
	if err != nil {
		return err
	}
	return writeSiteReport(w, o.output, rep)
}

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
	addEnvFlag(cmd, &o.env, "env", "environment (a directory under overlays/)")
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

// siteStatus reads env's site file from src and lists the example names the env's overlay and
// its Applications render.
func siteStatus(src render.Source, env string) (*siteReport, error) {
	known, err := src.Envs()
	if err != nil {
		return nil, failed(err)
	}
	if err := checkEnvs(known, env); err != nil {
		return nil, err
	}
	data, err := src.ReadFile(site.Path(env))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, failed(fmt.Errorf("%s does not exist: this revision keeps no site values for %s", site.Path(env), env))
	}
	if err != nil {
		return nil, failed(err)
	}
	v, err := site.Parse(env, data)
	if err != nil {
		return nil, failed(err)
	}
	rep := &siteReport{Env: env, File: v.File, Template: v.Template, Values: v.Values, Problems: v.Problems(), Examples: []site.Found{}}
	res, err := src.Render(env)
	if err != nil {
		return nil, failed(err)
	}
	rep.Examples = append(rep.Examples, site.ExamplesIn(res.Objects, v)...)
	if apps, err := src.RenderApps(env); err != nil {
		return nil, failed(err)
	} else if apps != nil {
		rep.Examples = append(rep.Examples, site.ExamplesIn(apps.Objects, v)...)
	}
	root := path.Join("clusters", env, "root.yaml") // the bootstrap Application, applied by hand
	if data, err := src.ReadFile(root); err == nil {
		for _, e := range site.Examples(string(data)) {
			rep.Examples = append(rep.Examples, site.Found{Kind: "file", Name: root, Example: e, Key: v.KeyFor(string(data))})
		}
	}
	return rep, nil
}

func writeSiteReport(w io.Writer, format string, rep *siteReport) error {
	switch format {
	case "json":
		return failed(writeJSON(w, rep))
	case "yaml":
		return failed(writeYAML(w, rep))
	}
	for _, c := range rep.Changes {
		fmt.Fprintf(w, "set %s %s: %s → %s\n", c.File, c.Path, orNone(c.Old), orNone(c.New))
	}
	if len(rep.Changes) > 0 {
		fmt.Fprintln(w, "review with git diff, then commit; auditor check shows what the render changes")
		fmt.Fprintln(w)
	}
	state := "set for this site"
	if rep.Template {
		state = "still the template's: auditor site set replaces them"
	}
	fmt.Fprintf(w, "%s (%s)\n", rep.File, state)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range site.Keys {
		val, ok := rep.Values[k.Name]
		note := ""
		switch {
		case !ok:
			val, note = "(not set)", "missing"
		case len(site.Examples(val)) > 0:
			note = "example"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", k.Name, val, note)
	}
	if err := tw.Flush(); err != nil {
		return failed(err)
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
	if len(rep.Examples) == 0 {
		fmt.Fprintf(w, "no example name in what %s renders\n", rep.Env)
		return nil
	}
	fmt.Fprintf(w, "%d example names in what %s renders:\n", len(rep.Examples), rep.Env)
	for _, f := range rep.Examples {
		by := "written in the manifest"
		if f.Key != "" {
			by = "site value " + f.Key
		}
		fmt.Fprintf(w, "  %s: %s (%s)\n", f.Object(), f.Example, by)
	}
	return nil
}
