package main

import (
	"context"
	"fmt"
	"path"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/release"
	"github.com/llm-gitops/platform/internal/engine/render"
	"github.com/llm-gitops/platform/internal/platform/localcluster"
)

// syncEnv plays Argo CD for the local cluster: renders env at revision, server-side applies it as
// argocd-controller and records the Application's synced revision.
func syncEnv(dir, env, repoURL, revision string) error {
	st, ok := localcluster.Running(dir)
	if !ok {
		return fmt.Errorf("no local cluster runs in %s: `make cluster-up` first", dir)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		return fmt.Errorf("read kubeconfig: %w", err)
	}
	repo, err := gitrepo.Open(repoURL)
	if err != nil {
		return err
	}
	snap, err := repo.Snapshot(revision)
	if err != nil {
		return err
	}
	src, err := render.FromSnapshot(snap)
	if err != nil {
		return err
	}
	apps, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: render.AppTarget(path.Join("apps", env))})
	if err != nil {
		return err
	}
	// What Argo CD applies: the env's pin, with its Application's kustomize patches.
	runs, err := release.At(repo, env, snap.Revision)
	if err != nil {
		return err
	}
	if runs.Revision != snap.Revision {
		if src, err = render.AtRevision(repo, runs.Revision); err != nil {
			return err
		}
	}
	if src, err = src.WithPatches(env, runs.Patches); err != nil {
		return err
	}
	res, err := render.Engine{}.Render(context.Background(), src, render.Target{Name: env})
	if err != nil {
		return err
	}
	syncer, err := localcluster.NewSyncer(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if err := syncer.Sync(ctx, "llm-"+env, res.Objects, false); err != nil {
		return err
	}
	for _, app := range apps.Objects {
		if app.GetKind() == "Application" {
			rev := snap.Revision
			if app.GetName() == "llm-"+env {
				rev = runs.Revision // the pin it synced
			}
			if err := syncer.RecordSync(ctx, app, repoURL, rev); err != nil {
				return err
			}
		}
	}
	fmt.Printf("synced %s at %.12s: %d objects applied server-side as %s in %s\n", env, runs.Revision, len(res.Objects), localcluster.ArgoManager, time.Since(start).Round(time.Millisecond))
	return nil
}
