package ledger_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/platform/ledger"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

// The snapshot a ledger record gets, read from a real Prometheus holding four synthetic weeks of
// qwen, matches what the fixture generated: at a saturated hour and at a quiet one.
func TestSnapshotFromARealPrometheus(t *testing.T) {
	tr := testfixture.QwenTraffic()
	var series bytes.Buffer
	require.NoError(t, tr.WriteOpenMetrics(&series))
	url := testcluster.StartPrometheus(t, series.Bytes())
	price := ledger.Cost{GPUsPerReplica: 1, Card: "l40s", GPUPriceUSDPerHour: 1.861}

	for _, tc := range []struct {
		name string
		at   time.Time
	}{
		{"weekday morning, both pods saturated", time.Date(2026, 11, 17, 10, 30, 0, 0, testfixture.Moscow)},
		{"night, no queue", time.Date(2026, 11, 17, 3, 30, 0, 0, testfixture.Moscow)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &ledger.Prometheus{URL: url, Window: "15m", Now: func() time.Time { return tc.at }}
			m, err := p.Snapshot(context.Background(), tr.Model, "vllm-qwen", price)
			require.NoError(t, err)
			arrivals, served, aborted, waiting := tr.PerPod(tc.at)
			ttft := tr.TTFT
			if waiting > 0 {
				ttft = tr.SlowTTFT
			}
			for name, c := range map[string]struct {
				got  *float64
				want float64
			}{
				"e2e p50":   {m.E2EP50, tr.E2E.Quantile(0.5)},
				"e2e p95":   {m.E2EP95, tr.E2E.Quantile(0.95)},
				"ttft p50":  {m.TTFTP50, ttft.Quantile(0.5)},
				"ttft p95":  {m.TTFTP95, ttft.Quantile(0.95)},
				"errors":    {m.ErrorRate, aborted / arrivals},
				"cost / 1k": {m.CostPer1kTokens, float64(len(tr.Pods)) * 1.861 / 3600 * 1000 / (float64(len(tr.Pods)) * (arrivals*tr.Prompt.Mean + served*tr.Response.Mean))},
			} {
				require.NotNil(t, c.got, name)
				assert.InDelta(t, c.want, *c.got, 1e-6*max(1, c.want), name)
			}
		})
	}

	// Another Deployment's pods (the canary's name pattern) are not qwen's.
	p := &ledger.Prometheus{URL: url, Window: "15m", Now: func() time.Time { return tr.Start.Add(10 * time.Hour) }}
	m, err := p.Snapshot(context.Background(), tr.Model, "vllm-qwen-canary", price)
	require.NoError(t, err)
	assert.Nil(t, m.E2EP50)
	assert.Nil(t, m.CostPer1kTokens)
}
