package main

import "github.com/spf13/cobra"

// addArgoCDNamespaceFlag adds --argocd-namespace, the namespace of Argo CD and its Applications,
// with --app-namespace, its former name in diff and blame, as a hidden deprecated alias.
func addArgoCDNamespaceFlag(cmd *cobra.Command, p *string, usage string) {
	f := cmd.Flags()
	f.StringVar(p, "argocd-namespace", "argocd", usage)
	f.StringVar(p, "app-namespace", "argocd", usage)
	_ = f.MarkDeprecated("app-namespace", "use --argocd-namespace") // MarkDeprecated hides it too
}

// argocdNamespaceSet says whether the command line set --argocd-namespace or its alias.
func argocdNamespaceSet(cmd *cobra.Command) bool {
	return cmd.Flags().Changed("argocd-namespace") || cmd.Flags().Changed("app-namespace")
}
