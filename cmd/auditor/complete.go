package main

import (
	"context"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/layout"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// Shell completion of the values that name something in the repository: envs, Applications,
// peaks, and the objects and namespaces an env renders. They are read from --repo when it is a directory (the work tree; peaks from HEAD, as
// schedule reads them); a URL is not cloned for a completion, which then offers nothing.

// completionDir is --repo of the command being completed, or "" when it is a URL.
func completionDir(cmd *cobra.Command) string {
	dir := "."
	if f := cmd.Flags().Lookup("repo"); f != nil && f.Value.String() != "" {
		dir = f.Value.String()
	}
	if gitrepo.IsURL(dir) {
		return ""
	}
	return dir
}

// completionEnv is completionDir and --env; env is "" when either is missing.
func completionEnv(cmd *cobra.Command) (dir, env string) {
	dir = completionDir(cmd)
	if f := cmd.Flags().Lookup("env"); f != nil && dir != "" {
		env = f.Value.String()
	}
	return dir, env
}

// completions is the values starting with prefix, for the shell.
func completions(values []string, prefix string) ([]string, cobra.ShellCompDirective) {
	var out []string
	for _, v := range values {
		if strings.HasPrefix(v, prefix) {
			out = append(out, v)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeEnvs offers the repository's envs.
func completeEnvs(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	dir := completionDir(cmd)
	if dir == "" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	s, err := render.FromDir(dir)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	l, err := layout.Read(s)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return completions(l.Names(), prefix)
}

// completeApps offers the Applications of --env's root (the path it syncs, as the layout says).
func completeApps(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	dir, env := completionEnv(cmd)
	if env == "" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	s, err := render.FromDir(dir)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	res, err := render.Apps(context.Background(), render.Engine{}, s, env)
	if err != nil || res == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var apps []string
	for _, o := range res.Objects {
		if o.GetKind() == "Application" {
			apps = append(apps, o.GetName())
		}
	}
	return completions(apps, prefix)
}

// completePeaks offers the peaks of --env's schedule at HEAD.
func completePeaks(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	dir, env := completionEnv(cmd)
	if env == "" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	repo, err := gitrepo.Open(dir)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	snap, err := repo.Snapshot("")
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	s, err := schedule.Load(snap, env)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var peaks []string
	for _, p := range s.Peaks {
		peaks = append(peaks, p.Name)
	}
	return completions(peaks, prefix)
}

// renderedForCompletion renders --env from the work tree of --repo; nil when either is missing
// or the render fails.
func renderedForCompletion(cmd *cobra.Command) *render.Result {
	dir, env := completionEnv(cmd)
	if env == "" {
		return nil
	}
	s, err := render.FromDir(dir)
	if err != nil {
		return nil
	}
	res, err := render.Engine{}.Render(context.Background(), s, render.Target{Name: env})
	if err != nil {
		return nil
	}
	return res
}

// completeObjects offers KIND/NAME of the objects --env renders, in -n's namespace when it is
// given, with the kind in lower case as kubectl prints it.
func completeObjects(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
	res := renderedForCompletion(cmd)
	if res == nil || len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ns := ""
	if f := cmd.Flags().Lookup("namespace"); f != nil {
		ns = f.Value.String()
	}
	var objs []string
	for _, o := range res.Objects {
		if ns != "" && o.GetNamespace() != ns {
			continue
		}
		if v := strings.ToLower(o.GetKind()) + "/" + o.GetName(); !slices.Contains(objs, v) {
			objs = append(objs, v)
		}
	}
	slices.Sort(objs)
	return completions(objs, prefix)
}

// completeNamespaces offers the namespaces of the objects --env renders.
func completeNamespaces(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	res := renderedForCompletion(cmd)
	if res == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var nss []string
	for _, o := range res.Objects {
		if n := o.GetNamespace(); n != "" && !slices.Contains(nss, n) {
			nss = append(nss, n)
		}
	}
	slices.Sort(nss)
	return completions(nss, prefix)
}
