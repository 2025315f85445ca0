package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/platform/localcluster"
	"github.com/llm-gitops/platform/internal/platform/profile"
	"github.com/llm-gitops/platform/internal/platform/schedule"
	"github.com/llm-gitops/platform/internal/platform/simulate"
)

// simulateOn runs a placement simulation on kube's cluster when --kubeconfig names one, else on
// a fresh local four-process cluster of bins' binaries (make tools), stopped afterwards.
func simulateOn(ctx context.Context, kube kubeFlags, bins clusterBinDirs, objs []*unstructured.Unstructured, opts simulate.Options) (*simulate.Report, error) {
	var cfg *rest.Config
	if kube.kubeconfig != "" {
		c, err := kube.config()
		if err != nil {
			return nil, err
		}
		cfg = c
	} else {
		if err := bins.resolve(); err != nil {
			return nil, err
		}
		fmt.Fprintln(os.Stderr, "starting a local cluster with kube-scheduler and kube-controller-manager ...")
		c, err := localcluster.Start(ctx, localcluster.Options{Scheduler: true, ControllerManager: true})
		if err != nil {
			return nil, err
		}
		defer c.Stop()
		cfg = c.Config
		fmt.Fprintf(os.Stderr, "cluster started in %s\n", c.Started.Round(100*time.Millisecond))
	}
	start := time.Now()
	rep, err := simulate.Run(ctx, cfg, objs, opts)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "simulation took %s\n", time.Since(start).Round(100*time.Millisecond))
	return rep, nil
}

// peaks reads the env's measured traffic profiles and returns the replicas of each profiled
// Deployment at its profile's peak.
func (o *simulateOptions) peaks(objs []*unstructured.Unstructured) (map[string]simulate.Scaled, error) {
	src, err := o.src.open()
	if err != nil {
		return nil, err
	}
	var sched *schedule.Schedule
	if file := schedule.Path(o.env); src.Has(file) {
		data, err := src.ReadFile(file)
		if err != nil {
			return nil, err
		}
		if sched, err = schedule.Parse(file, data); err != nil {
			return nil, err
		}
	}
	out := map[string]simulate.Scaled{}
	for _, d := range objs {
		file := profile.Path(o.env, d.GetAnnotations()[profile.ModelAnnotation])
		if d.GetKind() != "Deployment" || d.GetAnnotations()[profile.ModelAnnotation] == "" || !src.Has(file) {
			continue
		}
		data, err := src.ReadFile(file)
		if err != nil {
			return nil, err
		}
		p, err := profile.Parse(file, data)
		if err != nil {
			return nil, err
		}
		prop, wl, err := profile.ProposeFrom(p, objs, sched)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		n, when := prop.PeakReplicas()
		key := wl.Deployment.GetNamespace() + "/" + wl.Deployment.GetName()
		if _, done := out[key]; n > 0 && !done {
			out[key] = simulate.Scaled{Replicas: n, Why: file + ", " + when}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--at-peak: no measured traffic profile of a Deployment in clusters/%s/profiles (auditor profile --write makes one)", o.env)
	}
	return out, nil
}
