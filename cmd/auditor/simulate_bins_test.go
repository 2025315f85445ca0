package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// fakeBins makes the directories k8s-<version> and etcd-<version> under dir, with files named
// as the cluster's binaries.
func fakeBins(t *testing.T, dir string) (kube, etcd string) {
	t.Helper()
	kube = filepath.Join(dir, "k8s-"+testcluster.KubernetesVersion)
	etcd = filepath.Join(dir, "etcd-"+testcluster.EtcdVersion)
	for d, names := range map[string][]string{kube: kubeBins, etcd: etcdBins} {
		require.NoError(t, os.MkdirAll(d, 0o755))
		for _, n := range names {
			require.NoError(t, os.WriteFile(filepath.Join(d, n), nil, 0o755))
		}
	}
	return kube, etcd
}

// TestSimulateFindsClusterBinariesInTheCacheFromAnyDirectory: outside a checkout, with no flag
// and no variable, simulate takes the binaries from $XDG_CACHE_HOME/auditor.
func TestSimulateFindsClusterBinariesInTheCacheFromAnyDirectory(t *testing.T) {
	cache := t.TempDir()
	kube, etcd := fakeBins(t, filepath.Join(cache, "auditor"))
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("KUBE_BIN_DIR", "")
	t.Setenv("ETCD_BIN_DIR", "")
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	t.Chdir(t.TempDir())
	require.NoError(t, clusterBinDirs{Repo: repo}.resolve())
	wd, err := os.Getwd()
	require.NoError(t, err)
	assert.Equal(t, repo, wd, "the local cluster reads the audit policy from --repo's checkout")
	assert.Equal(t, kube, os.Getenv("KUBE_BIN_DIR"))
	assert.Equal(t, etcd, os.Getenv("ETCD_BIN_DIR"))
}

// TestSimulateFlagsNameTheClusterBinaries: --kube-bin-dir and --etcd-bin-dir win over the
// variables.
func TestSimulateFlagsNameTheClusterBinaries(t *testing.T) {
	kube, etcd := fakeBins(t, t.TempDir())
	t.Setenv("KUBE_BIN_DIR", "/nowhere")
	t.Setenv("ETCD_BIN_DIR", "/nowhere")
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	t.Chdir(t.TempDir())
	err = clusterBinDirs{Kube: kube, Etcd: etcd}.resolve()
	require.ErrorContains(t, err, "pass --repo CHECKOUT", "outside a checkout, without --repo")
	t.Chdir(repo)
	require.NoError(t, clusterBinDirs{Kube: kube, Etcd: etcd}.resolve())
	assert.Equal(t, kube, os.Getenv("KUBE_BIN_DIR"))
	assert.Equal(t, etcd, os.Getenv("ETCD_BIN_DIR"))
}

// TestSimulateSaysHowToGetClusterBinaries: when none is found the error lists where it looked
// and the commands that get them.
func TestSimulateSaysHowToGetClusterBinaries(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("KUBE_BIN_DIR", "")
	t.Setenv("ETCD_BIN_DIR", "")
	t.Chdir(t.TempDir())
	err := clusterBinDirs{}.resolve()
	require.Error(t, err)
	for _, want := range []string{"make tools", "--kube-bin-dir=CHECKOUT/bin/k8s-" + testcluster.KubernetesVersion, "KUBE_BIN_DIR", filepath.Join(cache, "auditor", "k8s-"+testcluster.KubernetesVersion) + " (no kube-apiserver, kube-scheduler, kube-controller-manager)"} {
		assert.Contains(t, err.Error(), want)
	}
}
