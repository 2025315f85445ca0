package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeFlags are kubectl's connection flags.
type kubeFlags struct {
	kubeconfig, context string
}

func (f *kubeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&f.context, "context", "", "kubeconfig context to use")
}

// rules are kubectl's loading rules with --kubeconfig.
func (f *kubeFlags) rules() *clientcmd.ClientConfigLoadingRules {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	return rules
}

func (f *kubeFlags) config() (*rest.Config, error) {
	rules := f.rules()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		// client-go's own text ("try setting KUBERNETES_MASTER") names a variable kubectl dropped.
		return nil, usageErr("no cluster configured: set KUBECONFIG or --kubeconfig")
	}
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}
