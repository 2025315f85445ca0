package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// envFlagAnnotation marks a flag whose value names an env (--env, promote's --from and --to):
// the command checks it against the repository's envs (checkEnvs), and the command-tree test
// finds it by this mark.
const envFlagAnnotation = "auditor/env"

// addEnvFlag adds a string flag naming an env.
func addEnvFlag(cmd *cobra.Command, p *string, name, usage string) {
	cmd.Flags().StringVar(p, name, "", usage)
	markEnvFlag(cmd, name)
}

// markEnvFlag marks cmd's flag name as naming an env.
func markEnvFlag(cmd *cobra.Command, name string) {
	_ = cmd.Flags().SetAnnotation(name, envFlagAnnotation, []string{"true"})
	_ = cmd.RegisterFlagCompletionFunc(name, completeEnvs)
}

// checkEnvs is the one check of an env named on the command line: each of envs (empty ones
// skipped) must be one of known, else a usage error (exit code 2) lists the known envs.
func checkEnvs(known []string, envs ...string) error {
	for _, env := range envs {
		if env != "" && !slices.Contains(known, env) {
			list := "none: the repository has no " + layout.LayoutFile + " listing envs, and no directory under overlays/ holds a kustomization; list the env with its root in " + layout.LayoutFile + " (docs/reference/layout.md), or give diff its root with --root"
			if len(known) > 0 {
				list = strings.Join(known, ", ")
			}
			return usageErr("unknown env %q (known envs: %s)", env, list)
		}
	}
	return nil
}

// repoEnvs lists the envs of repo at rev ("" for HEAD, or main in a clone), as its layout says
// (layout.Read: .auditor.yaml, else the directories under overlays/).
func repoEnvs(repo *gitrepo.Repo, rev string) ([]string, error) {
	l, err := repoLayout(repo, rev)
	if err != nil {
		return nil, err
	}
	return l.Names(), nil
}

// repoLayout reads the layout of repo at rev ("" for HEAD); every failure is an exit-2 error.
func repoLayout(repo *gitrepo.Repo, rev string) (*layout.Layout, error) {
	src, err := render.AtRevision(repo, rev)
	if err != nil {
		return nil, failed(err)
	}
	l, err := layout.Read(src)
	return l, failed(err)
}

// checkRepoEnvs is checkEnvs against the envs of repo at rev.
func checkRepoEnvs(repo *gitrepo.Repo, rev string, envs ...string) error {
	if !slices.ContainsFunc(envs, func(e string) bool { return e != "" }) {
		return nil
	}
	known, err := repoEnvs(repo, rev)
	if err != nil {
		return err
	}
	return checkEnvs(known, envs...)
}

// groupArgs is the Args of a command grouping sub-commands: an argument that names none of
// them is a usage error listing them (cobra would run the group and print its help).
func groupArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return usageErr("unknown %s command %q (want %s)", cmd.Name(), args[0], strings.Join(names, ", "))
}
