package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// promServer is a real HTTP server implementing /api/v1/query in Prometheus' JSON format.
// answer maps a query substring to a sample value ("" = empty vector).
func promServer(t *testing.T, answer func(q string) (string, bool)) (*httptest.Server, *[]string) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/api/v1/query" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		q := r.Form.Get("query")
		mu.Lock()
		seen = append(seen, q)
		mu.Unlock()
		if r.Form.Get("time") == "" {
			t.Errorf("query without time: %s", q)
		}
		if strings.Contains(q, "bad(") {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "error", "errorType": "bad_data", "error": `parse error: unexpected "("`})
			return
		}
		v, ok := answer(q)
		result := []any{}
		if ok {
			result = append(result, map[string]any{"metric": map[string]string{}, "value": []any{1740819600.123, v}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success",
			"data": map[string]any{"resultType": "vector", "result": result}})
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func TestPrometheusSnapshot(t *testing.T) {
	srv, seen := promServer(t, func(q string) (string, bool) {
		switch {
		case strings.Contains(q, "histogram_quantile(0.5, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket"):
			return "1.25", true
		case strings.Contains(q, "histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket"):
			return "4.5", true
		case strings.Contains(q, "histogram_quantile(0.5, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket"):
			return "NaN", true // no requests
		case strings.Contains(q, "vllm:time_to_first_token_seconds_bucket"):
			return "", false // empty vector
		case strings.Contains(q, `finished_reason="abort"`):
			return "0.02", true
		}
		return "", false
	})
	now := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	p := &Prometheus{URL: srv.URL + "/", Now: func() time.Time { return now }}
	m, err := p.Snapshot(context.Background(), "qwen", "vllm-qwen-canary", Cost{})
	if err != nil {
		t.Fatal(err)
	}
	if m.E2EP50 == nil || *m.E2EP50 != 1.25 || m.E2EP95 == nil || *m.E2EP95 != 4.5 || m.TTFTP50 != nil || m.TTFTP95 != nil ||
		m.ErrorRate == nil || *m.ErrorRate != 0.02 || m.Window != "5m" || !m.At.Equal(now) {
		t.Fatalf("snapshot: %+v", m)
	}
	if len(*seen) != 5 {
		t.Fatalf("%d queries", len(*seen))
	}
	want := `histogram_quantile(0.5, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{model_name="qwen", pod=~"vllm-qwen-canary-[a-z0-9]+-[a-z0-9]+"}[5m])))`
	if (*seen)[0] != want {
		t.Errorf("query:\n%s\nwant\n%s", (*seen)[0], want)
	}

	// An API error is reported with its type and message.
	_, err = p.Query(context.Background(), "bad(", now)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.ErrorType != "bad_data" {
		t.Fatalf("bad query: %v", err)
	}
	// Unreachable server.
	srv2 := httptest.NewServer(http.NotFoundHandler())
	srv2.Close()
	if _, err := (&Prometheus{URL: srv2.URL}).Snapshot(context.Background(), "qwen", "vllm-qwen", Cost{}); err == nil {
		t.Fatal("no error from a closed server")
	}
}

// TestSyncWithMetrics: Sync attaches a snapshot to new serving records, and stamps SyncedAt;
// the derived fields still equal Rebuild's.
func TestSyncWithMetrics(t *testing.T) {
	ctx := context.Background()
	srv, _ := promServer(t, func(q string) (string, bool) {
		if strings.Contains(q, `pod=~"vllm-qwen-canary-`) {
			return "2", true
		}
		return "1", true
	})
	f := newFixture(t, nil)
	synced := time.Date(2025, 3, 1, 9, 5, 0, 0, time.UTC)
	p := &Prometheus{URL: srv.URL}
	res, err := Sync(ctx, f.remote(), SyncRequest{Env: "prod", SyncedAt: synced, Metrics: p.ForRecord})
	if err != nil {
		t.Fatal(err)
	}
	if res.Appended != 3 {
		t.Fatalf("appended %d", res.Appended)
	}
	got, err := Read(f.open(), "prod", "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		want := 1.0
		if r.Deployment == "vllm-qwen-canary" {
			want = 2
		}
		if r.Metrics == nil || r.Metrics.E2EP95 == nil || *r.Metrics.E2EP95 != want || r.SyncedAt == nil || !r.SyncedAt.Equal(synced) {
			t.Errorf("record %s: metrics %+v synced %v", r.Deployment, r.Metrics, r.SyncedAt)
		}
	}
	rebuilt, err := Rebuild(ctx, f.open(), "prod")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := Marshal(Derived(got))
	b, _ := Marshal(rebuilt)
	if string(a) != string(b) {
		t.Fatalf("rebuild differs:\n%s\nvs\n%s", b, a)
	}
}

// TestPrometheusQueryAnswers: a scalar result, and an answer that is not the API's JSON (a
// proxy's error page) reported with its HTTP status.
func TestPrometheusQueryAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		if r.Form.Get("query") == "scalar(1)" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "success",
				"data": map[string]any{"resultType": "scalar", "result": []any{1740819600.123, "0.75"}}})
			return
		}
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html>bad gateway</html>"))
	}))
	t.Cleanup(srv.Close)
	p := &Prometheus{URL: srv.URL}
	v, err := p.Query(context.Background(), "scalar(1)", time.Now())
	if err != nil || v == nil || *v != 0.75 {
		t.Fatalf("scalar: %v %v", v, err)
	}
	_, err = p.Query(context.Background(), "up", time.Now())
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadGateway || !strings.Contains(apiErr.Message, "bad gateway") {
		t.Fatalf("bad gateway: %#v", err)
	}
}
