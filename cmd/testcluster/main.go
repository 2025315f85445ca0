// Command testcluster starts and stops the local Kubernetes control plane for people:
// `make cluster-up` / `make cluster-down` call it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/llm-gitops/platform/internal/platform/localcluster"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testcluster up|down|sync|receive [--dir DIR] [--scheduler] [--controller-manager] [--env ENV --repo URL --revision REV]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", ".cluster", "state directory")
	sched := fs.Bool("scheduler", true, "also run kube-scheduler")
	cm := fs.Bool("controller-manager", true, "also run kube-controller-manager")
	argo := fs.Bool("argocd", true, "also run Argo CD (application controller, repo-server, Redis)")
	kwok := fs.Bool("kwok", true, "also run kwok (nodes that run pods)")
	env := fs.String("env", "prod", "sync: environment to sync")
	repo := fs.String("repo", ".", "sync: repository directory or URL")
	revision := fs.String("revision", "main", "sync: revision to sync")
	listen := fs.String("listen", "127.0.0.1:18099", "receive: address to listen on")
	clusters := fs.Int("clusters", 1, "up: how many clusters: the first runs Argo CD, each other is registered there as a cluster")
	_ = fs.Parse(os.Args[2:])
	switch os.Args[1] {
	case "up":
		up(*dir, *sched, *cm, *argo, *kwok, *env, *clusters)
	case "down":
		if _, ok := localcluster.Running(*dir); !ok {
			fmt.Println("no local cluster running in", *dir)
		}
		if err := localcluster.Down(*dir); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		os.RemoveAll(*dir)
		fmt.Println("local cluster stopped")
	case "receive":
		if err := receive(*listen); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
	case "sync":
		if err := syncEnv(*dir, *env, *repo, *revision); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: testcluster up|down|sync [--dir DIR]")
		os.Exit(2)
	}
}

// up starts a local cluster in dir, unless one runs there: with the scheduler, controller
// manager, Argo CD (syncing env from a published clone) and kwok as asked, and clusters in all.
func up(dir string, sched, cm, argo, kwok bool, env string, clusters int) {
	if st, ok := localcluster.Running(dir); ok {
		fmt.Printf("a local cluster already runs in %s (%s); `make cluster-down` stops it\nexport KUBECONFIG=%s\n", dir, st.URL, st.Kubeconfig)
		return
	}
	_ = localcluster.Down(dir) // leftovers of a cluster that died
	os.RemoveAll(dir)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: dir, Detach: true, Scheduler: sched, ControllerManager: cm, ArgoCD: argo, Kwok: kwok, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		_ = localcluster.Down(dir)
		os.Exit(1)
	}
	if kwok {
		if err := addPoolNodes(ctx, c, env); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			_ = localcluster.Down(dir)
			os.Exit(1)
		}
	}
	gitURL := ""
	if argo {
		url, head, err := publish(c.Dir)
		if err == nil {
			gitURL = url
			err = bootstrap(ctx, c, c.Dir, env, head)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			_ = localcluster.Down(dir)
			os.Exit(1)
		}
	}
	var members []*localcluster.Member
	for i := 2; i <= clusters; i++ {
		m, err := c.AddCluster(ctx, fmt.Sprintf("cluster-%d", i))
		if err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			_ = localcluster.Down(dir)
			os.Exit(1)
		}
		members = append(members, m)
	}
	if gitURL != "" {
		fmt.Printf("Argo CD reads %s (clone it, commit, push: Argo CD syncs llm-%s)\n", gitURL, env)
	}
	if len(members) > 0 {
		fmt.Println("more clusters, registered in Argo CD; for the auditor's config:\nclusters:")
		for _, m := range members {
			fmt.Printf("  - {name: %s, server: '%s', kubeconfig: %s, auditLog: %s}  # admin: KUBECONFIG=%s\n",
				m.Name, m.URL, m.ReaderKubeconfig, m.AuditLog, m.Kubeconfig)
		}
	}
	fmt.Printf("local cluster up in %s (logs in %s)\nexport KUBECONFIG=%s\n", time.Since(begin).Round(100*time.Millisecond), c.Dir, c.Kubeconfig)
}
