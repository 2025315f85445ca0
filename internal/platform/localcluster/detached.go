package localcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// State is what a detached cluster records in Dir/cluster.json.
type State struct {
	URL        string `json:"url"`
	Kubeconfig string `json:"kubeconfig"`
	Etcd       string `json:"etcd"`
	// RepoServer is Argo CD's repo-server (plaintext gRPC), when the cluster runs Argo CD.
	RepoServer string `json:"repoServer,omitempty"`
}

// Down stops a detached cluster started in dir by its pid files, its member clusters
// (AddCluster) first. It is a no-op when none runs.
func Down(dir string) error {
	members, _ := filepath.Glob(filepath.Join(dir, "clusters", "*"))
	for _, m := range members {
		if err := Down(m); err != nil {
			return err
		}
	}
	for _, name := range []string{"argocd-applicationset-controller", "argocd-application-controller", "argocd-repo-server", "redis", "kwok",
		"kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		if err := stopPID(filepath.Join(dir, name+".pid"), 10*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// Running reports whether a detached cluster in dir is alive, and its state when it is.
func Running(dir string) (State, bool) {
	var st State
	data, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil || json.Unmarshal(data, &st) != nil {
		return st, false
	}
	pid, err := os.ReadFile(filepath.Join(dir, "kube-apiserver.pid"))
	if err != nil {
		return st, false
	}
	n, err := strconv.Atoi(string(pid))
	return st, err == nil && pidAlive(n)
}

// startReaper starts a shell that waits for this process to end, however it ends (a panicking
// test skips every deferred call), then kills the cluster's processes and removes dir.
func startReaper(dir string) error {
	script := `while kill -0 "$1" 2>/dev/null; do sleep 0.3; done
for f in "$2"/*.pid "$2"/clusters/*/*.pid; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done
sleep 0.2; rm -rf "$2"`
	cmd := exec.Command("/bin/sh", "-c", script, "reaper", strconv.Itoa(os.Getpid()), dir)
	cmd.SysProcAttr = reaperAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start cluster reaper: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
