package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/llm-gitops/platform/internal/engine/auditlog"
)

// AdmissionAddr is the address the admission webhook listens on, once it does ("" without one).
func (d *Daemon) AdmissionAddr() string {
	select {
	case <-d.admissionListening:
		return d.admissionAddr
	case <-time.After(10 * time.Second):
		return ""
	}
}

// serveAdmission serves the admission webhook (auditEvents.admission) over TLS: POST
// /api/v1/admission answers allowed at once and records the write into the people store. Its
// timeouts are short: the API server waits for it at most the webhook's timeoutSeconds anyway.
func (d *Daemon) serveAdmission(ctx context.Context) error {
	cfg := d.cfg.AuditEvents.Admission
	certs := &certFiles{cert: cfg.CertFile, key: cfg.KeyFile}
	if _, err := certs.get(nil); err != nil {
		return fmt.Errorf("admission webhook: %w", err)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get}
	if cfg.ClientCAFile != "" {
		pem, err := os.ReadFile(cfg.ClientCAFile)
		if err != nil {
			return fmt.Errorf("admission webhook: client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("admission webhook: client CA %s: no certificate", cfg.ClientCAFile)
		}
		tlsCfg.ClientCAs, tlsCfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("admission webhook: listen %s: %w", cfg.Listen, err)
	}
	d.admissionAddr = ln.Addr().String()
	close(d.admissionListening)
	h := auditlog.NewAdmissionHandler(d.people, "", 0)
	go h.Run(ctx)
	mux := http.NewServeMux()
	mux.Handle("POST /api/v1/admission", h)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, TLSConfig: tlsCfg,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		if n := h.Dropped(); n > 0 {
			d.log.Warn("admission webhook: writes not recorded (queue full)", "dropped", n)
		}
	}()
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("admission webhook: %w", err)
	}
	return nil
}

// certFiles is a serving certificate read from files, read again when either file changes.
type certFiles struct {
	cert, key string

	mu      sync.Mutex
	at      [2]time.Time
	current *tls.Certificate
}

func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var at [2]time.Time
	for i, p := range []string{c.cert, c.key} {
		st, err := os.Stat(p)
		if err != nil {
			if c.current != nil {
				return c.current, nil // being replaced: the last one read
			}
			return nil, err
		}
		at[i] = st.ModTime()
	}
	if c.current != nil && at == c.at {
		return c.current, nil
	}
	cert, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		if c.current != nil {
			return c.current, nil // half written: the last one read
		}
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	c.current, c.at = &cert, at
	return c.current, nil
}
