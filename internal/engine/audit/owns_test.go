package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/live"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/testing/gittest"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestAReplicaWithoutArgoCDsClusterRendersWhatDeclaresApplications: a replica that shares the
// work and does not audit Argo CD's own cluster renders an Application there only when it may
// declare Applications. Argo CD's comparison of the synced revision says which: one listing an
// Application is rendered (its child joins the group), one listing a ConfigMap alone is not. One
// Argo CD has not compared, or compared at another source, is.
func TestAReplicaWithoutArgoCDsClusterRendersWhatDeclaresApplications(t *testing.T) {
	testcluster.Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := fmt.Sprintf("own%04x", rand.IntN(1<<16))
	const repoURL, edge = "https://git.example.com/owns.git", "https://edge.example.com:6443"
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: " + p + "}\ndata: {k: v}\n"
	}
	app := func(name, path, server string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": name, "namespace": "argocd", "labels": map[string]any{"owns-test": p}},
			"spec": map[string]any{"project": "default",
				"source":      map[string]any{"repoURL": repoURL, "path": path, "targetRevision": "HEAD"},
				"destination": map[string]any{"server": server, "namespace": p}},
		}}
	}
	child := app(p+"-child", "apps/child", edge)
	childYAML, err := json.Marshal(child.Object)
	require.NoError(t, err)
	dir := t.TempDir()
	gittest.WriteFiles(t, dir, map[string]string{
		"overlays/solo/kustomization.yaml": "resources: [cm.yaml]\n", "overlays/solo/cm.yaml": cm("main"),
		"apps/leaf/kustomization.yaml": "resources: [cm.yaml]\n", "apps/leaf/cm.yaml": cm("leaf"),
		"apps/fresh/kustomization.yaml": "resources: [cm.yaml]\n", "apps/fresh/cm.yaml": cm("fresh"),
		"apps/moved/kustomization.yaml": "resources: [cm.yaml]\n", "apps/moved/cm.yaml": cm("moved"),
		"apps/parent/kustomization.yaml": "resources: [child.json]\n", "apps/parent/child.json": string(childYAML),
		"apps/child/kustomization.yaml": "resources: [cm.yaml]\n", "apps/child/cm.yaml": cm("child"),
	})
	gittest.Run(t, dir, "init", "-q", "-b", "main")
	gittest.Run(t, dir, "add", "-A")
	gittest.Run(t, dir, "commit", "-q", "-m", "owns")
	head := strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "HEAD"))

	s, err := testcluster.NewSyncer(cluster.Config)
	require.NoError(t, err)
	// Argo CD's comparison of each Application, as its status says it; fresh has none yet, and
	// moved's is of another path than the one synced (its spec changed since, not synced).
	compared := map[string][]map[string]any{
		p + "-main":   {{"version": "v1", "kind": "ConfigMap", "namespace": p, "name": "main", "status": "Synced"}},
		p + "-leaf":   {{"version": "v1", "kind": "ConfigMap", "namespace": p, "name": "leaf", "status": "Synced"}},
		p + "-moved":  {{"version": "v1", "kind": "ConfigMap", "namespace": p, "name": "moved", "status": "Synced"}},
		p + "-parent": {{"group": "argoproj.io", "version": "v1alpha1", "kind": "Application", "namespace": "argocd", "name": p + "-child", "status": "Synced"}},
	}
	apps := []*unstructured.Unstructured{app(p+"-main", "overlays/solo", "https://kubernetes.default.svc"),
		app(p+"-leaf", "apps/leaf", "https://kubernetes.default.svc"), app(p+"-fresh", "apps/fresh", "https://kubernetes.default.svc"),
		app(p+"-moved", "apps/moved", "https://kubernetes.default.svc"),
		app(p+"-parent", "apps/parent", "https://kubernetes.default.svc"), child}
	for _, a := range apps {
		require.NoError(t, s.RecordSync(ctx, a, repoURL, head))
		t.Cleanup(func() {
			_ = cluster.Kubectl(context.Background(), "-n", "argocd", "delete", "application", a.GetName(), "--ignore-not-found").Run()
		})
		if rs, ok := compared[a.GetName()]; ok {
			source, _, _ := unstructured.NestedMap(a.Object, "spec", "source")
			if a.GetName() == p+"-moved" {
				source["path"] = "apps/elsewhere"
			}
			patch, err := json.Marshal(map[string]any{"status": map[string]any{"reconciledAt": time.Now().UTC().Format(time.RFC3339), "resources": rs,
				"sync": map[string]any{"comparedTo": map[string]any{"source": source, "destination": a.Object["spec"].(map[string]any)["destination"]}}}})
			require.NoError(t, err)
			out, err := cluster.Kubectl(ctx, "-n", "argocd", "patch", "application", a.GetName(), "--type=merge", "-p", string(patch)).CombinedOutput()
			require.NoError(t, err, "%s", out)
		}
	}

	repo, err := gitrepo.Open(dir)
	require.NoError(t, err)
	c, err := live.New(ctx, cluster.Config)
	require.NoError(t, err)
	renders := render.NewCache("", 8)
	a := New(Config{Repo: repo, Live: c, RepoURL: repoURL, Renders: renders,
		AppName: func(string) string { return p + "-main" },
		Select: func(string) *AppSelection {
			return &AppSelection{Selector: labels.SelectorFromSet(labels.Set{"owns-test": p})}
		},
		// This replica audits the edge cluster alone.
		Owns:        func(cluster string) bool { return cluster == "edge" },
		ClusterName: func(server, _ string) (string, bool) { return "edge", server == edge },
	})
	rep, err := a.Run(ctx, Request{Env: "solo"})
	require.NoError(t, err)

	var audited []string
	for _, u := range rep.Applications {
		audited = append(audited, u.Name)
	}
	assert.Equal(t, []string{p + "-child"}, audited, "the report has the edge cluster's Application alone")
	// parent is rendered (it declares child); fresh and moved too (Argo CD has not compared it,
	// or compared another source); main and leaf are not (Argo CD's comparison lists a ConfigMap
	// alone).
	assert.Equal(t, 3, renders.Stats().Rendered, "renders: %+v", renders.Stats())
}
