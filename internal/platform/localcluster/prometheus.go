package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// StartPrometheus runs a real Prometheus server in dir, its TSDB filled beforehand with the
// series of openMetrics (OpenMetrics text, timestamps in seconds, ending in "# EOF"), which
// promtool turns into blocks (`promtool tsdb create-blocks-from openmetrics`). The server keeps
// them for 400 days and scrapes nothing. It returns the server's base URL and the function that
// stops it.
func StartPrometheus(ctx context.Context, dir, server, promtool string, openMetrics []byte) (string, func(), error) {
	input, data := filepath.Join(dir, "series.om"), filepath.Join(dir, "data")
	if err := os.WriteFile(input, openMetrics, 0o644); err != nil {
		return "", nil, fmt.Errorf("prometheus: write series: %w", err)
	}
	// Blocks up to 486 h (the largest of promtool's ranges under 500 h): four weeks take a few
	// passes over the input instead of one per 2 h.
	out, err := exec.CommandContext(ctx, promtool, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=500h", "--quiet", input, data).CombinedOutput()
	if err != nil {
		return "", nil, fmt.Errorf("promtool tsdb create-blocks-from openmetrics: %w: %s", err, bytes.TrimSpace(out))
	}
	_ = os.Remove(input)
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte("global:\n  scrape_interval: 1m\n"), 0o644); err != nil {
		return "", nil, fmt.Errorf("prometheus: write config: %w", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return "", nil, fmt.Errorf("prometheus: %w", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	p, err := startProcess(dir, "prometheus", server, []string{
		"--config.file=" + config, "--storage.tsdb.path=" + data, "--storage.tsdb.retention.time=400d",
		"--web.listen-address=" + addr, "--query.lookback-delta=10m",
	}, nil, false)
	if err != nil {
		return "", nil, fmt.Errorf("prometheus: %w", err)
	}
	stop := func() { p.stop(10 * time.Second) }
	url := "http://" + addr
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		if err := p.exited(); err != nil {
			stop()
			return "", nil, fmt.Errorf("prometheus: %w", err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/-/ready", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, stop, nil
			}
		}
		select {
		case <-ctx.Done():
			stop()
			return "", nil, fmt.Errorf("prometheus at %s not ready after 60 s: %s", url, tailFile(p.log.Name(), 15))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
