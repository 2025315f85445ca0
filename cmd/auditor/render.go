package main

import (
	"github.com/spf13/cobra"
)

func newRenderCommand() *cobra.Command {
	var src sourceFlags
	var env string
	cmd := &cobra.Command{
		Use:   "render --env ENV [--repo DIR|URL] [--revision REV]",
		Short: "Render an environment's overlay to a YAML stream, as Argo CD would",
		Example: `  auditor render --env prod
  auditor render --env dev --revision HEAD~1 | kubectl apply --dry-run=server -f -`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := src.render(env)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(res.YAML)
			return err
		},
	}
	cmd.Flags().StringVar(&env, "env", "", "environment (a directory under overlays/)")
	src.add(cmd)
	return cmd
}
