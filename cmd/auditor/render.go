package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"
)

// renderOptions are the flags of `auditor render`.
type renderOptions struct {
	src sourceFlags
	env string
}

func newRenderCommand() *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render --env ENV [--repo DIR|URL] [--revision REV]",
		Short: "Render an environment's overlay to a YAML stream, as Argo CD would",
		Example: `  auditor render --env prod
  auditor render --env dev --revision HEAD~1 | kubectl apply --dry-run=server -f -`,
		RunE: runE(o),
	}
	addEnvFlag(cmd, &o.env, "env", "environment (a directory under overlays/)")
	o.src.add(cmd)
	return cmd
}

// Complete has nothing to fill.
func (o *renderOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate has nothing to check before rendering: sourceFlags.render rejects a missing --env.
func (o *renderOptions) Validate() error { return nil }

// Run prints the env's rendered YAML stream.
func (o *renderOptions) Run(_ context.Context, w io.Writer) error {
	res, err := o.src.render(o.env)
	if err != nil {
		return err
	}
	_, err = w.Write(res.YAML)
	return err
}
