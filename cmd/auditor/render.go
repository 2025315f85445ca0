package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"
)

// renderOptions are the flags of `auditor render`.
type renderOptions struct {
	src         sourceFlags
	env, output string
}

func newRenderCommand() *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render --env ENV [--repo DIR|URL] [--revision REV] [-o yaml|json|text]",
		Short: "Render an environment's overlay to a YAML stream, as Argo CD would",
		Example: `  auditor render --env prod
  auditor render --env dev --revision HEAD~1 | kubectl apply --dry-run=server -f -
  auditor render --env prod -o json | jq '.[] | select(.kind == "Deployment") | .metadata.name'`,
		RunE: runE(o),
	}
	addEnvFlag(cmd, &o.env, "env", "env (as the repository's .auditor.yaml names it, else a directory under overlays/)")
	addOutputFlag(cmd, &o.output, "yaml and text: the multi-document YAML stream; json: a list of the objects", "yaml", "json", "text")
	o.src.add(cmd)
	return cmd
}

// Complete has nothing to fill.
func (o *renderOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate has nothing to check before rendering: sourceFlags.render rejects a missing --env.
func (o *renderOptions) Validate() error { return nil }

// Run prints the env's rendered objects: the YAML stream, or a JSON list.
func (o *renderOptions) Run(_ context.Context, w io.Writer) error {
	res, err := o.src.render(o.env)
	if err != nil {
		return err
	}
	if o.output == "json" {
		objs := make([]map[string]any, 0, len(res.Objects))
		for _, obj := range res.Objects {
			objs = append(objs, obj.Object)
		}
		return failed(writeJSON(w, objs))
	}
	_, err = w.Write(res.YAML)
	return failed(err)
}
