package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
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
		if err := repoExists(cmd); err != nil {
			return err
		}
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

// repoExists fails with one wording, whatever the command, when --repo names a directory (or a
// file:// URL) that does not exist: each command would otherwise say it its own way, from
// opening, cloning or listing it.
func repoExists(cmd *cobra.Command) error {
	f := cmd.Flags().Lookup("repo")
	if f == nil {
		return nil
	}
	dir, isFile := strings.CutPrefix(f.Value.String(), "file://")
	if !isFile && gitrepo.IsURL(dir) {
		return nil // a remote: the clone says what is wrong
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return failed(fmt.Errorf("repository %s does not exist", f.Value.String()))
	}
	return nil
}
