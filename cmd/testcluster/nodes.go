package main

import (
	"context"
	"fmt"
	"os"

	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/localcluster"
	"github.com/llm-gitops/platform/internal/platform/simulate"
)

// addPoolNodes adds kwok nodes modelled on env's NodePools (rendered from the working tree):
// system, CPU and GPU pools with their labels, taints and capacity.
func addPoolNodes(ctx context.Context, c *localcluster.Cluster, env string) error {
	src, err := render.FromDir(".")
	if err != nil {
		return err
	}
	res, err := render.Engine{}.Render(ctx, src, render.Target{Name: env})
	if err != nil {
		return err
	}
	groups := simulate.GroupsFromNodePools(res.Objects)
	for i := range groups {
		groups[i].Count = min(groups[i].Count, 6) // enough for prod's pods; each node is a kwok heartbeat
	}
	nodes := simulate.Nodes(groups)
	fmt.Fprintf(os.Stderr, "adding %d kwok nodes modelled on %s's NodePools\n", len(nodes), env)
	if err := c.AddNodes(ctx, nodes); err != nil {
		return fmt.Errorf("add nodes: %w", err)
	}
	return nil
}
