package render

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// requirement is the version a go.mod requires of a module ("" when it does not).
func requirement(t *testing.T, gomod, module string) string {
	t.Helper()
	data, err := os.ReadFile(gomod)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + `\s+(v\S+)`).FindSubmatch(data)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// TestRendersWithTheToolsArgoCDRuns: the Helm SDK and the kustomize API the auditor renders with
// are the releases Argo CD's repo-server runs (its hack/tool-versions.sh, in the pinned argo-cd
// module), and so are the CLIs the test cluster's repo-server is given. A difference would read as
// drift wherever the two releases render differently.
func TestRendersWithTheToolsArgoCDRuns(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/argoproj/argo-cd/v3").Output()
	require.NoError(t, err, "the argo-cd module")
	data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "hack", "tool-versions.sh"))
	require.NoError(t, err)
	argo := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(HELM_VERSION|KUSTOMIZE_VERSION)=(\S+)`).FindAllStringSubmatch(string(data), -1) {
		argo[m[1]] = "v" + m[2]
	}
	require.Len(t, argo, 2, "tool-versions.sh names both")

	assert.Equal(t, argo["HELM_VERSION"], HelmVersion, "the Helm SDK release the auditor names")
	assert.Equal(t, argo["HELM_VERSION"], requirement(t, "../../../go.mod", "helm.sh/helm/v4"), "the Helm SDK in go.mod")
	assert.Equal(t, argo["HELM_VERSION"], requirement(t, "../../../hack/clustertools/helm/go.mod", "helm.sh/helm/v4"), "the helm CLI the test cluster's repo-server runs")
	assert.Equal(t, argo["HELM_VERSION"], testcluster.HelmVersion)
	for _, f := range []string{"../../../Makefile", "../../../Dockerfile"} {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.Contains(t, string(data), "-X helm.sh/helm/v4/internal/version.version="+argo["HELM_VERSION"],
			"%s builds the auditor with the Helm release charts see (.Capabilities.HelmVersion)", f)
	}

	assert.Equal(t, argo["KUSTOMIZE_VERSION"], testcluster.KustomizeVersion, "the kustomize CLI the test cluster's repo-server runs")
	assert.Equal(t, argo["KUSTOMIZE_VERSION"], requirement(t, "../../../go.mod", "sigs.k8s.io/kustomize/kustomize/v5"), "the kustomize edit commands in go.mod")
	cli := requirement(t, "../../../hack/clustertools/kustomize/go.mod", "sigs.k8s.io/kustomize/api")
	require.NotEmpty(t, cli)
	assert.Equal(t, cli, requirement(t, "../../../go.mod", "sigs.k8s.io/kustomize/api"), "the kustomize API the auditor builds with is the CLI's")
}
