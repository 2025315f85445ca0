package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/llm-gitops/platform/internal/daemon/server"
	"github.com/llm-gitops/platform/internal/daemon/webview"
	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// backend adapts the daemon to the HTTP handlers.
type backend struct{ d *Daemon }

func (b backend) Ready() bool                              { return b.d.ready.Load() }
func (b backend) Envs() []string                           { return b.d.cfg.Envs }
func (b backend) Status() any                              { return b.d.status() }
func (b backend) TriggerFetch()                            { b.d.TriggerFetch() }
func (b backend) Report(env string) (*drift.Report, error) { return b.d.Report(env) }

// Addr is the address the HTTP server listens on, once it does (":0" in tests).
func (d *Daemon) Addr() string {
	select {
	case <-d.listening:
		return d.addr
	case <-time.After(10 * time.Second):
		return ""
	}
}

func (d *Daemon) serveHTTP(ctx context.Context) error {
	ln, err := net.Listen("tcp", d.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", d.cfg.Listen, err)
	}
	d.addr = ln.Addr().String()
	close(d.listening)
	blames := d.blames
	opts := server.Options{Authorize: d.authorize, Pprof: d.cfg.API.Pprof, Blame: blames}
	if d.people != nil && d.cfg.AuditEvents.Webhook {
		opts.AuditEvents = auditlog.Handler(d.people)
	}
	opts.Episodes = http.HandlerFunc(d.serveEpisodes)
	opts.Pages = webview.Handler(newPages(d, blames), d.log)
	if opts.MCP, err = d.mcpHandler(blames); err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	if d.cfg.Webhook != nil {
		opts.Webhook = &server.WebhookOptions{Secret: d.secret}
	}
	srv := &http.Server{Handler: server.New(backend{d}, d.metrics.reg, opts),
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}
