package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/version"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "auditor",
		Short:         "Audit live Kubernetes objects against the GitOps repository",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand(), newRenderCommand(), newDiffCommand(), newCapacityCommand(), newServeCommand(), newCheckCommand(), newSimulateCommand(), newLedgerCommand(), newRollbackCommand(), newScheduleCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the module version, Git commit and Go version",
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			switch output {
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			case "", "text":
				_, err := fmt.Fprintln(cmd.OutOrStdout(), info.String())
				return err
			default:
				return &exitError{code: 2, err: fmt.Errorf("unknown output format %q (want text or json)", output)}
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
