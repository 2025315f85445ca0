package daemon

import (
	"context"
	"errors"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/daemon/mcp"
	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/version"
)

// mcpCluster answers the MCP server's cluster tools from what the daemon serves over /api/v1:
// the last audits' reports, blame and the episodes it keeps.
type mcpCluster struct {
	d     *Daemon
	blame *blamer
}

func (c mcpCluster) Envs() []string { return c.d.cfg.Envs }

func (c mcpCluster) Report(_ context.Context, env string) (*drift.Report, error) {
	return c.d.Report(env)
}

func (c mcpCluster) Blame(ctx context.Context, env, cluster string, ref blame.Ref) (*blame.Blame, error) {
	res, _, err := c.blame.blame(ctx, blameAsk{env: env, cluster: cluster, ref: ref})
	return res, err
}

func (c mcpCluster) Episodes(_ context.Context, env string, limit int) ([]episode.Episode, []episode.Episode, error) {
	return c.d.episodes.Open(env), c.d.episodes.Ended(env, limit), nil
}

// mcpHandler serves the MCP tools over streamable HTTP (at /mcp, behind the API's guard):
// stateless, each request a JSON answer, so each is authorized on its own. A handler runs to its
// end whatever the write timeout; the tools bound themselves (one check at a time, a bounded
// schedule plan, blame's own walk limit).
func (d *Daemon) mcpHandler(b *blamer) (http.Handler, error) {
	s, err := mcp.New(mcp.Options{
		Cluster: mcpCluster{d: d, blame: b},
		Tools:   d.cfg.API.MCPTools,
		Version: version.Get().String(),
		Repo: func(context.Context) (*gitrepo.Repo, error) {
			if repo := d.git.Repo(); repo != nil {
				return repo, nil
			}
			return nil, errors.New("the repository is not fetched yet")
		},
	})
	if err != nil {
		return nil, err
	}
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
		&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: d.log}), nil
}
