package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// daemonFlags say which running daemon (auditor serve) names the people behind the drift.
type daemonFlags struct {
	url, tokenFile string
}

func (f *daemonFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "daemon", "", "a running auditor serve (http://host:port): name the people it names, from sources this command has not (the admission webhook, the audit webhook, Argo CD's records)")
	cmd.Flags().StringVar(&f.tokenFile, "daemon-token-file", "", "file holding the bearer token of the daemon's API (api.auth token or kubernetes)")
}

// takePeople names, on rep's drift that names nobody, the people the daemon's report of the
// same env names on the same drift in the same state (drift.TakePeople). The daemon not answering
// is said on stderr; the diff goes on without.
func (f *daemonFlags) takePeople(ctx context.Context, rep *drift.Report, stderr io.Writer) {
	if f.url == "" || rep == nil {
		return
	}
	theirs, err := f.report(ctx, rep.Env)
	if err != nil {
		fmt.Fprintf(stderr, "warning: people not taken from the daemon: %v\n", err)
		return
	}
	drift.TakePeople(rep, theirs)
}

// report is the daemon's GET /api/v1/drift?env=env.
func (f *daemonFlags) report(ctx context.Context, env string) (*drift.Report, error) {
	u, err := url.Parse(strings.TrimSuffix(f.url, "/") + "/api/v1/drift")
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("--daemon %q: not a URL", f.url)
	}
	u.RawQuery = url.Values{"env": {env}}.Encode()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	if f.tokenFile != "" {
		tok, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("daemon token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("daemon: GET %s: %s: %s", u.Path, resp.Status, strings.TrimSpace(string(body)))
	}
	var rep drift.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return nil, fmt.Errorf("daemon: the drift report: %w", err)
	}
	return &rep, nil
}
