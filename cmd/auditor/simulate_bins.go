package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/platform/localcluster"
)

// clusterBinDirs are where a local cluster's binaries are: kube-apiserver, kube-scheduler and
// kube-controller-manager in Kube, etcd in Etcd. Empty means look for them.
type clusterBinDirs struct {
	Kube, Etcd string
	// Repo is --repo: a checkout of this repository, when the working directory is in none.
	Repo string
}

func (d *clusterBinDirs) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&d.Kube, "kube-bin-dir", "", "directory of kube-apiserver, kube-scheduler and kube-controller-manager "+localcluster.KubernetesVersion+" (default $KUBE_BIN_DIR, else found as the error says)")
	cmd.Flags().StringVar(&d.Etcd, "etcd-bin-dir", "", "directory of etcd "+localcluster.EtcdVersion+" (default $ETCD_BIN_DIR, else found as the error says)")
}

// kubeBins and etcdBins are the files each directory must hold.
var (
	kubeBins = []string{"kube-apiserver", "kube-scheduler", "kube-controller-manager"}
	etcdBins = []string{"etcd"}
)

// resolve picks each directory from the flag, the environment, the checkout of the working
// directory, the directory of the auditor's executable, and the user's cache, in that order.
// It sets KUBE_BIN_DIR and ETCD_BIN_DIR, which the local cluster reads.
func (d clusterBinDirs) resolve() error {
	kubeName := "k8s-" + localcluster.KubernetesVersion
	etcdName := "etcd-" + localcluster.EtcdVersion
	kube, kubeTried := pickDir(d.Kube, "KUBE_BIN_DIR", kubeName, kubeBins)
	etcd, etcdTried := pickDir(d.Etcd, "ETCD_BIN_DIR", etcdName, etcdBins)
	if kube != "" && etcd != "" {
		if err := os.Setenv("KUBE_BIN_DIR", kube); err != nil {
			return err
		}
		if err := os.Setenv("ETCD_BIN_DIR", etcd); err != nil {
			return err
		}
		return d.enterCheckout()
	}
	cache := filepath.Join(cacheDir(), "auditor")
	return fmt.Errorf(`simulate needs kube-apiserver, kube-scheduler, kube-controller-manager %s and etcd %s; looked in:
  %s
Get them: in a checkout of github.com/llm-gitops/platform run `+"`make tools`"+` (it builds them from Go modules into bin/), then either
  pass --kube-bin-dir=CHECKOUT/bin/%s --etcd-bin-dir=CHECKOUT/bin/%s (or set KUBE_BIN_DIR and ETCD_BIN_DIR), or
  copy CHECKOUT/bin/%s and CHECKOUT/bin/%s into %s, or next to the auditor binary`,
		localcluster.KubernetesVersion, localcluster.EtcdVersion, strings.Join(append(kubeTried, etcdTried...), "\n  "),
		kubeName, etcdName, kubeName, etcdName, cache)
}

// enterCheckout makes the working directory a checkout of this repository: the local cluster
// reads the API server's audit policy (clusters/audit-policy.yaml) from the checkout around it.
// Outside one, --repo's directory serves when it is a checkout.
func (d clusterBinDirs) enterCheckout() error {
	if _, ok := checkoutRoot(); ok {
		return nil
	}
	if d.Repo != "" && isCheckout(d.Repo) {
		return os.Chdir(d.Repo)
	}
	return fmt.Errorf("simulate's local cluster reads clusters/audit-policy.yaml from a checkout of github.com/llm-gitops/platform: run it inside one, or pass --repo CHECKOUT (a directory)")
}

func isCheckout(dir string) bool {
	return len(missingFiles(dir, []string{"go.mod", "Makefile", filepath.Join("clusters", "audit-policy.yaml")})) == 0
}

// pickDir returns the first candidate directory holding every file of need, and the
// candidates it tried (each with what it lacked) when none does.
func pickDir(flag, envVar, name string, need []string) (string, []string) {
	var candidates []string
	switch {
	case flag != "":
		candidates = []string{flag} // an explicit directory is the only one looked at
	case os.Getenv(envVar) != "":
		candidates = []string{os.Getenv(envVar)}
	default:
		if root, ok := checkoutRoot(); ok {
			candidates = append(candidates, filepath.Join(root, "bin", name))
		}
		if exe, err := os.Executable(); err == nil {
			if exe, err = filepath.EvalSymlinks(exe); err == nil {
				candidates = append(candidates, filepath.Join(filepath.Dir(exe), name))
			}
		}
		candidates = append(candidates, filepath.Join(cacheDir(), "auditor", name))
	}
	var tried []string
	for _, dir := range candidates {
		missing := missingFiles(dir, need)
		if len(missing) == 0 {
			return dir, nil
		}
		tried = append(tried, fmt.Sprintf("%s (no %s)", dir, strings.Join(missing, ", ")))
	}
	return "", tried
}

func missingFiles(dir string, names []string) []string {
	var missing []string
	for _, n := range names {
		if st, err := os.Stat(filepath.Join(dir, n)); err != nil || st.IsDir() {
			missing = append(missing, n)
		}
	}
	return missing
}

// checkoutRoot is the checkout of this repository above the working directory, if any.
func checkoutRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if isCheckout(dir) {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// cacheDir is $XDG_CACHE_HOME, else the system's user cache directory (~/.cache on Linux).
func cacheDir() string {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return d
	}
	return filepath.Join(os.TempDir(), "cache")
}
