package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"
)

// options is a command's lifecycle, as kubectl's: Complete fills what the flags leave open
// (defaults, arguments, files), Validate rejects bad flags with exit code 2, Run does the work.
type options interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context, w io.Writer) error
}

// runE runs o's lifecycle as a cobra RunE.
func runE(o options) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		return o.Run(ctx, cmd.OutOrStdout())
	}
}
