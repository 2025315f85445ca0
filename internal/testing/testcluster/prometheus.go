package testcluster

import (
	"context"
	"testing"

	"github.com/llm-gitops/platform/internal/platform/localcluster"
)

// StartPrometheus runs a real Prometheus server for the test (see localcluster.StartPrometheus).
// It returns the server's base URL; the server stops when the test ends. Without the binaries
// (`make tools` builds them) the test is skipped, or fails with AUDITOR_TEST_CLUSTER=required.
func StartPrometheus(t testing.TB, openMetrics []byte) string {
	t.Helper()
	server := NeedTool(t, func(b Binaries) string { return b.Prometheus })
	promtool := NeedTool(t, func(b Binaries) string { return b.Promtool })
	url, stop, err := localcluster.StartPrometheus(context.Background(), t.TempDir(), server, promtool, openMetrics)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return url
}
