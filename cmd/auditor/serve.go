package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/daemon"
	"github.com/llm-gitops/platform/internal/gitrepo"
)

func newServeCommand() *cobra.Command {
	var configFile, logFormat string
	cmd := &cobra.Command{
		Use:   "serve --config FILE",
		Short: "Run the auditor as a daemon: watch-driven audits, chat reports, HTTP API and metrics",
		Example: `  auditor serve --config /etc/auditor/config.yaml
  curl localhost:8080/api/v1/drift?env=prod`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configFile == "" {
				return &exitError{code: 2, err: fmt.Errorf("--config is required")}
			}
			cfg, err := daemon.LoadConfig(configFile)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			var handler slog.Handler = slog.NewTextHandler(os.Stderr, nil)
			if logFormat == "json" {
				handler = slog.NewJSONHandler(os.Stderr, nil)
			}
			log := slog.New(handler)
			restCfg, err := clusterConfig(cfg)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			d, err := daemon.New(cfg, restCfg, log)
			if err != nil {
				return &exitError{code: 2, err: err}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log.Info("auditor serving", "listen", cfg.Listen, "envs", cfg.Envs, "repo", gitrepo.RedactURL(cfg.Repo), "sinks", len(cfg.Sinks))
			if err := d.Run(ctx); err != nil {
				return &exitError{code: 2, err: err}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "configuration file (YAML)")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "log format: text or json")
	return cmd
}

// clusterConfig is the in-cluster config inside a pod without an explicit kubeconfig, else
// kubectl's loading rules.
func clusterConfig(cfg *daemon.Config) (*rest.Config, error) {
	if cfg.Kubeconfig == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
		return c, nil
	}
	k := kubeFlags{kubeconfig: cfg.Kubeconfig, context: cfg.Context}
	return k.config()
}
