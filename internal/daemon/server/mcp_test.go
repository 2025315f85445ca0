package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

type noBackend struct{}

func (noBackend) Ready() bool                          { return true }
func (noBackend) Envs() []string                       { return nil }
func (noBackend) Report(string) (*drift.Report, error) { return nil, nil }
func (noBackend) Status() any                          { return nil }
func (noBackend) TriggerFetch()                        {}

// TestMCPIsBehindAuthorize: /mcp answers every method only past the API's guard.
func TestMCPIsBehindAuthorize(t *testing.T) {
	reached := 0
	mcp := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached++; w.WriteHeader(http.StatusOK) })
	authorize := func(r *http.Request) (int, string) {
		if r.Header.Get("Authorization") != "Bearer good" {
			return http.StatusUnauthorized, "a valid bearer token is required"
		}
		return 0, ""
	}
	h := New(noBackend{}, prometheus.NewRegistry(), Options{Authorize: authorize, MCP: mcp})
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, "/mcp", strings.NewReader("{}")))
		assert.Equal(t, http.StatusUnauthorized, rec.Code, method)
		assert.Equal(t, `Bearer realm="auditor"`, rec.Header().Get("WWW-Authenticate"))
	}
	assert.Zero(t, reached)
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer good")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, 1, reached)
}
