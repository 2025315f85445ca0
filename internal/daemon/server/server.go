// Package server is the daemon's HTTP face: health, readiness, Prometheus metrics, the drift
// report as JSON, the MCP tools, and the Git push webhook (HMAC-checked, size-limited).
package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// MaxWebhookBody bounds a webhook request body.
const MaxWebhookBody = 1 << 20

// Backend is what the handlers read from and poke.
type Backend interface {
	// Ready is true after the first full audit.
	Ready() bool
	// Envs lists the audited environments.
	Envs() []string
	// Report returns the last report of an env.
	Report(env string) (*drift.Report, error)
	// Status is a JSON-able summary (staleness, errors, leader).
	Status() any
	// TriggerFetch fetches Git and re-audits.
	TriggerFetch()
}

// Options say who may do what.
type Options struct {
	// Webhook: nil disables POST /api/v1/git-webhook (Git is fetched on the interval only); a
	// non-empty Secret authenticates each push (GitHub HMAC or GitLab token); an empty Secret
	// accepts any push (the config said insecure: true).
	Webhook *WebhookOptions
	// Authorize guards the other /api/ routes (they show what runs, values included): it returns
	// 0 to let the request through, else the status to answer (401, 403) and why. Nil: open.
	Authorize func(r *http.Request) (status int, reason string)
	// Pprof serves /debug/pprof/ behind Authorize (off unless asked for).
	Pprof bool
	// AuditEvents, when set, receives kube-apiserver's audit webhook (POST /api/v1/audit-events,
	// an EventList per batch) behind Authorize.
	AuditEvents http.Handler
	// Episodes, when set, serves the drift episodes (GET /api/v1/episodes) behind Authorize.
	Episodes http.Handler
	// Pages, when set, serves the web view (GET / and GET /blame) behind Authorize.
	Pages http.Handler
	// Blame, when set, serves GET /api/v1/blame (?env=&kind=&namespace=&name=: the commit behind
	// each field of an object, its drift and the writes to it; blame.Blame as JSON) behind
	// Authorize.
	Blame http.Handler
	// MCP, when set, serves the Model Context Protocol's streamable HTTP transport at /mcp
	// behind Authorize: the auditor's read-only tools for an assistant.
	MCP http.Handler
}

// WebhookOptions configure the push webhook.
type WebhookOptions struct{ Secret string }

// New returns the handler: /healthz, /readyz and /metrics open; /api/ guarded.
func New(b Backend, reg *prometheus.Registry, opts Options) http.Handler {
	mux := http.NewServeMux()
	guard := func(h http.HandlerFunc) http.HandlerFunc {
		if opts.Authorize == nil {
			return h
		}
		return func(w http.ResponseWriter, r *http.Request) {
			if code, reason := opts.Authorize(r); code != 0 {
				if code == http.StatusUnauthorized {
					w.Header().Set("WWW-Authenticate", `Bearer realm="auditor"`)
				}
				http.Error(w, reason, code)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !b.Ready() {
			http.Error(w, "not ready: first audit not done", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if opts.Pprof {
		// Go's profiles (go tool pprof http://HOST/debug/pprof/heap), guarded like the API: a
		// heap profile holds the process' memory, live values included.
		mux.HandleFunc("GET /debug/pprof/", guard(pprof.Index))
		mux.HandleFunc("GET /debug/pprof/profile", guard(pprof.Profile))
	}
	if opts.AuditEvents != nil {
		mux.HandleFunc("POST /api/v1/audit-events", guard(opts.AuditEvents.ServeHTTP))
	}
	if opts.Pages != nil {
		mux.HandleFunc("GET /{$}", guard(opts.Pages.ServeHTTP))
		mux.HandleFunc("GET /blame", guard(opts.Pages.ServeHTTP))
	}
	if opts.Episodes != nil {
		mux.HandleFunc("GET /api/v1/episodes", guard(opts.Episodes.ServeHTTP))
	}
	if opts.Blame != nil {
		mux.HandleFunc("GET /api/v1/blame", guard(opts.Blame.ServeHTTP))
	}
	if opts.MCP != nil {
		mux.HandleFunc("/mcp", guard(opts.MCP.ServeHTTP))
	}
	mux.HandleFunc("GET /api/v1/status", guard(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, b.Status()) }))
	mux.HandleFunc("GET /api/v1/drift", guard(driftHandler(b)))
	if opts.Webhook == nil {
		return mux
	}
	secret := opts.Webhook.Secret
	mux.HandleFunc("POST /api/v1/git-webhook", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		if secret != "" && !authentic(r, body, secret) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		b.TriggerFetch()
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "fetch scheduled\n")
	})
	return mux
}

// driftHandler serves the drift report of the ?env= asked for, or of the only env there is.
func driftHandler(b Backend) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		env := r.URL.Query().Get("env")
		envs := b.Envs()
		if env == "" && len(envs) == 1 {
			env = envs[0]
		}
		if env == "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "?env= is required", "envs": envs})
			return
		}
		rep, err := b.Report(env)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": err.Error(), "env": env})
			return
		}
		writeJSON(w, http.StatusOK, rep)
	}
}

// authentic checks GitHub's X-Hub-Signature-256 (HMAC-SHA256 of the body) or GitLab's
// X-Gitlab-Token (the secret itself), in constant time.
func authentic(r *http.Request, body []byte, secret string) bool {
	if sig := r.Header.Get("X-Hub-Signature-256"); sig != "" {
		got, err := hex.DecodeString(strings.TrimPrefix(sig, "sha256="))
		if err != nil {
			return false
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		return hmac.Equal(got, mac.Sum(nil))
	}
	if tok := r.Header.Get("X-Gitlab-Token"); tok != "" {
		return subtle.ConstantTimeCompare([]byte(tok), []byte(secret)) == 1
	}
	return false
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
