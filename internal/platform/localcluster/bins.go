package localcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Versions of the cluster binaries, kept in step with the Makefile's tools target.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.7.3"
	ArgoCDVersion     = "v3.6.1"
	KwokVersion       = "v0.8.0"
	KustomizeVersion  = "v5.8.3"
	HelmVersion       = "v4.3.1"
	MiniredisVersion  = "v2.40.0"
	PrometheusVersion = "v0.313.2"
)

// Binaries locates the executables the cluster runs.
type Binaries struct {
	APIServer, Etcd, Scheduler, ControllerManager string
	// ArgoCD is the one argocd binary; it runs as the component its name (a symlink) says.
	ArgoCD, Kwok, Kustomize, Helm, Redis string
	// Prometheus and Promtool are the server and its tool, built without service discovery.
	Prometheus, Promtool string
}

// ErrNoBinaries means the cluster binaries have not been built; `make tools` builds them.
var ErrNoBinaries = errors.New("cluster binaries not found: run `make tools` (builds kube-apiserver " + KubernetesVersion + ", etcd " + EtcdVersion + ", Argo CD " + ArgoCDVersion + " and kwok " + KwokVersion + " from Go modules)")

// FindBinaries returns the binaries from $KUBE_BIN_DIR and $ETCD_BIN_DIR, or else from the
// repository's bin/ directory (found by walking up from the working directory).
func FindBinaries() (Binaries, error) {
	kubeDir, etcdDir := os.Getenv("KUBE_BIN_DIR"), os.Getenv("ETCD_BIN_DIR")
	if kubeDir == "" || etcdDir == "" {
		root, err := repoRoot()
		if err != nil {
			return Binaries{}, err
		}
		if kubeDir == "" {
			kubeDir = filepath.Join(root, "bin", "k8s-"+KubernetesVersion)
		}
		if etcdDir == "" {
			etcdDir = filepath.Join(root, "bin", "etcd-"+EtcdVersion)
		}
	}
	b := Binaries{
		APIServer:         filepath.Join(kubeDir, "kube-apiserver"),
		Scheduler:         filepath.Join(kubeDir, "kube-scheduler"),
		ControllerManager: filepath.Join(kubeDir, "kube-controller-manager"),
		Etcd:              filepath.Join(etcdDir, "etcd"),
	}
	if root, err := repoRoot(); err == nil {
		bin := filepath.Join(root, "bin")
		b.ArgoCD = filepath.Join(bin, "argocd-"+ArgoCDVersion, "argocd")
		b.Kwok = filepath.Join(bin, "kwok-"+KwokVersion, "kwok")
		b.Kustomize = filepath.Join(bin, "kustomize-"+KustomizeVersion, "kustomize")
		b.Helm = filepath.Join(bin, "helm-"+HelmVersion, "helm")
		b.Redis = filepath.Join(bin, "redis-"+MiniredisVersion, "redis")
		b.Prometheus = filepath.Join(bin, "prometheus-"+PrometheusVersion, "prometheus")
		b.Promtool = filepath.Join(bin, "prometheus-"+PrometheusVersion, "promtool")
	}
	for _, p := range []string{b.APIServer, b.Etcd} {
		if _, err := os.Stat(p); err != nil {
			return b, fmt.Errorf("%w (missing %s)", ErrNoBinaries, p)
		}
	}
	return b, nil
}

// repoRoot walks up from the working directory to the directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "Makefile")); err == nil && fileExists(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// need reports the first of paths that is not an executable file, naming `make tools`.
func need(what string, paths ...string) error {
	for _, p := range paths {
		if p == "" || !fileExists(p) {
			return fmt.Errorf("%s: %w (missing %s)", what, ErrNoBinaries, p)
		}
	}
	return nil
}
