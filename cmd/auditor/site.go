package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/platform/site"
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
	addEnvFlag(cmd, &o.env, "env", "env (as the repository's .auditor.yaml names it, else a directory under overlays/)")
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
	o.src.tell(src)
	rep, err := siteStatus(src, o.env)
	if err != nil {
		return err
	}
	return writeSiteReport(w, o.output, rep)
}
