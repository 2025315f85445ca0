package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/daemon"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// serveOptions are the flags of `auditor serve`.
type serveOptions struct {
	configFile, logFormat string
}

func newServeCommand() *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve --config FILE",
		Short: "Run the auditor as a daemon: watch-driven audits, chat reports, HTTP API and metrics",
		Example: `  auditor serve --config /etc/auditor/config.yaml
  curl localhost:8080/api/v1/drift?env=prod`,
		RunE: runE(o),
	}
	cmd.Flags().StringVar(&o.configFile, "config", "", "configuration file (YAML)")
	cmd.Flags().StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	return cmd
}

// Complete has nothing to fill.
func (o *serveOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate rejects a missing --config.
func (o *serveOptions) Validate() error {
	if o.configFile == "" {
		return usageErr("--config is required")
	}
	return nil
}

// Run runs the daemon until SIGINT or SIGTERM.
func (o *serveOptions) Run(context.Context, io.Writer) error {
	cfg, err := daemon.LoadConfig(o.configFile)
	if err != nil {
		return failed(err)
	}
	var handler slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if o.logFormat == "json" {
		handler = slog.NewJSONHandler(os.Stderr, nil)
	}
	log := slog.New(handler)
	restCfg, err := clusterConfig(cfg)
	if err != nil {
		return failed(err)
	}
	d, err := daemon.New(cfg, restCfg, log)
	if err != nil {
		return failed(err)
	}
	if os.Getenv("GOGC") == "" {
		// A long-running daemon whose live heap is mostly its caches: half of it as headroom
		// between collections instead of all of it (GOGC=100) keeps ~35 MB off the RSS at
		// 10,000 objects for a few more collections; GOGC in the environment overrides.
		debug.SetGCPercent(daemon.DefaultGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("auditor serving", "listen", cfg.Listen, "envs", cfg.Envs, "repo", gitrepo.RedactURL(cfg.Repo), "sinks", len(cfg.Sinks))
	return failed(d.Run(ctx))
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
