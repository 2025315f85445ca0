package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Prometheus reads a metrics snapshot of a served version from the Prometheus HTTP API
// (instant queries on /api/v1/query, through client_golang's API client).
type Prometheus struct {
	// URL is the server's base URL, e.g. http://prometheus-operated.llm-monitoring.svc:9090.
	URL string
	// Window is the rate window (default 5m).
	Window string
	// Client defaults to a client with a 10 s timeout.
	Client *http.Client
	// Now gives the evaluation time (default time.Now).
	Now func() time.Time
}

// Queries returns the PromQL of a snapshot of deployment serving model: the 0.5 and 0.95
// quantiles of vllm:e2e_request_latency_seconds and vllm:time_to_first_token_seconds, and the
// error rate, the fraction of finished requests vLLM counted as aborted:
// sum(rate(vllm:request_success_total{finished_reason="abort"})) / sum(rate(vllm:request_success_total)).
// Pods are selected by the Deployment's pod name pattern <deployment>-<hash>-<id>, so that
// vllm-qwen does not match vllm-qwen-canary's pods.
//
// With a price (c.GPUsPerReplica and c.GPUPriceUSDPerHour), costPer1kTokens is the replicas
// serving × c's price of a replica an hour ÷ (prompt + generated tokens an hour) × 1,000:
// the platform's recording rule model_revision:vllm_cost_usd_per_1k_tokens:rate5m, computed from
// the raw series so that it needs no rule evaluation, with the price Git states.
func (p *Prometheus) Queries(model, deployment string, c Cost) map[string]string {
	w := p.window()
	sel := fmt.Sprintf(`model_name=%q, pod=~"%s-[a-z0-9]+-[a-z0-9]+"`, model, regexp.QuoteMeta(deployment))
	q := func(quantile, metric string) string {
		return fmt.Sprintf(`histogram_quantile(%s, sum by (le) (rate(%s_bucket{%s}[%s])))`, quantile, metric, sel, w)
	}
	qs := map[string]string{
		"e2eP50":    q("0.5", "vllm:e2e_request_latency_seconds"),
		"e2eP95":    q("0.95", "vllm:e2e_request_latency_seconds"),
		"ttftP50":   q("0.5", "vllm:time_to_first_token_seconds"),
		"ttftP95":   q("0.95", "vllm:time_to_first_token_seconds"),
		"errorRate": fmt.Sprintf(`sum(rate(vllm:request_success_total{%s, finished_reason="abort"}[%s])) / sum(rate(vllm:request_success_total{%s}[%s]))`, sel, w, sel, w),
	}
	if c.GPUsPerReplica > 0 && c.GPUPriceUSDPerHour > 0 {
		replicaHour := strconv.FormatFloat(float64(c.GPUsPerReplica)*c.GPUPriceUSDPerHour, 'f', -1, 64)
		qs["costPer1kTokens"] = fmt.Sprintf(`count(count by (pod) (vllm:num_requests_running{%s})) * %s / 3600 * 1000 / ((sum(rate(vllm:prompt_tokens_total{%s}[%s])) + sum(rate(vllm:generation_tokens_total{%s}[%s]))) > 0)`,
			sel, replicaHour, sel, w, sel, w)
	}
	return qs
}

func (p *Prometheus) window() string {
	if p.Window == "" {
		return "5m"
	}
	return p.Window
}

// Snapshot runs the queries at the current time. A query with no data (or NaN, e.g. no
// requests) leaves its field nil; an HTTP or API error fails the snapshot.
func (p *Prometheus) Snapshot(ctx context.Context, model, deployment string, c Cost) (*Metrics, error) {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	m := &Metrics{Window: p.window(), At: now().UTC().Truncate(time.Second)}
	qs := p.Queries(model, deployment, c)
	for _, f := range []struct {
		name string
		dst  **float64
	}{{"e2eP50", &m.E2EP50}, {"e2eP95", &m.E2EP95}, {"ttftP50", &m.TTFTP50}, {"ttftP95", &m.TTFTP95}, {"errorRate", &m.ErrorRate}, {"costPer1kTokens", &m.CostPer1kTokens}} {
		if qs[f.name] == "" {
			continue
		}
		v, err := p.Query(ctx, qs[f.name], m.At)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		*f.dst = v
	}
	return m, nil
}

// ForRecord adapts Snapshot to SyncRequest.Metrics.
func (p *Prometheus) ForRecord(ctx context.Context, r Record) (*Metrics, error) {
	return p.Snapshot(ctx, r.Model, r.Deployment, r.Cost)
}

// APIError is an error answer of the Prometheus API.
type APIError struct {
	Status    int
	ErrorType string
	Message   string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("prometheus: HTTP %d: %s: %s", e.Status, e.ErrorType, e.Message)
}

// Query runs an instant query at t with client_golang's API client and returns its single
// value: a scalar, or the first sample of a vector (nil for an empty vector or NaN).
func (p *Prometheus) Query(ctx context.Context, query string, t time.Time) (*float64, error) {
	client := p.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	c, err := api.NewClient(api.Config{Address: p.URL, Client: client})
	if err != nil {
		return nil, fmt.Errorf("prometheus %s: %w", p.URL, err)
	}
	sc := &statusClient{Client: c}
	val, _, err := promv1.NewAPI(sc).Query(ctx, query, t)
	var apiErr *promv1.Error
	switch {
	case errors.As(err, &apiErr):
		msg := apiErr.Msg
		if apiErr.Detail != "" {
			msg += ": " + truncate(apiErr.Detail, 200)
		}
		return nil, &APIError{Status: sc.status, ErrorType: string(apiErr.Type), Message: msg}
	case err != nil:
		return nil, fmt.Errorf("prometheus: %w", err)
	}
	var v float64
	switch val := val.(type) {
	case *model.Scalar:
		v = float64(val.Value)
	case model.Vector:
		if len(val) == 0 {
			return nil, nil
		}
		v = float64(val[0].Value)
	default:
		return nil, fmt.Errorf("prometheus: unexpected result type %q", val.Type())
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, nil
	}
	return &v, nil
}

// statusClient keeps the HTTP status of the last answer, which client_golang's API errors do
// not carry, for APIError.
type statusClient struct {
	api.Client
	status int
}

func (c *statusClient) Do(ctx context.Context, req *http.Request) (*http.Response, []byte, error) {
	resp, body, err := c.Client.Do(ctx, req)
	if resp != nil {
		c.status = resp.StatusCode
	}
	return resp, body, err
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
