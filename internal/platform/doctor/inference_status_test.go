package doctor

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/llm-gitops/platform/internal/engine/manifest"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// TestDoctorNamesPoolsNotAccepted: on the real API server with the module's InferencePool CRD,
// doctor reads each pool's status.parents and names the pools a Gateway has not accepted, and
// why. No Gateway controller runs in the test cluster: the test writes the status a controller
// would, as the cluster's admin through the status subresource (a test fixture, not a
// controller's write).
func TestDoctorNamesPoolsNotAccepted(t *testing.T) {
	testcluster.Need(t)
	ns := cluster.Namespace(t)
	pool := func(name string) string {
		return fmt.Sprintf(`apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: %s, namespace: %s}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: vllm-%[1]s}}
  targetPorts: [{number: 8000}]
  endpointPickerRef: {kind: Service, name: epp-%[1]s, port: {number: 9002}}
`, name, ns)
	}
	objs, err := manifest.Decode([]byte(pool("qwen") + "---\n" + pool("llama")))
	require.NoError(t, err)
	apply(t, pool("qwen")) // llama is rendered but not synced: not checked

	checks := func() []Check {
		t.Helper()
		kube, err := kubernetes.NewForConfig(cluster.Config)
		require.NoError(t, err)
		served, _, err := servedKinds(kube.Discovery())
		require.NoError(t, err)
		dyn, err := cluster.Dynamic()
		require.NoError(t, err)
		return poolStatusChecks(context.Background(), dyn, objs, served)
	}
	name := "InferencePool " + ns + "/qwen accepted"
	got := checks()
	require.Len(t, got, 1, "%+v", got)
	assert.Equal(t, name, got[0].Name)
	assert.False(t, got[0].OK)
	assert.Contains(t, got[0].Detail, "no Gateway reports on it (status.parents is empty)")

	status := func(accepted, resolved string) {
		t.Helper()
		cond := func(typ, st, reason string) string {
			return fmt.Sprintf(`{"type":%q,"status":%q,"reason":%q,"message":"set by the test","lastTransitionTime":"2026-12-03T00:00:00Z"}`, typ, st, reason)
		}
		patch := fmt.Sprintf(`{"status":{"parents":[{"parentRef":{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"llm-gateway","namespace":%q},"controllerName":"istio.io/gateway-controller","conditions":[%s,%s]}]}}`,
			ns, cond("Accepted", accepted, "Accepted"), cond("ResolvedRefs", resolved, "InvalidExtensionRef"))
		kubectl(t, "-n", ns, "patch", "inferencepool", "qwen", "--subresource=status", "--type=merge", "-p", patch)
	}
	status("True", "False")
	got = checks()
	require.Len(t, got, 1)
	assert.False(t, got[0].OK)
	assert.Equal(t, "Gateway "+ns+"/llm-gateway: not ResolvedRefs (False: InvalidExtensionRef set by the test)", got[0].Detail)
	assert.NotEmpty(t, got[0].Fix)

	status("False", "False")
	got = checks()
	assert.Equal(t, "Gateway "+ns+"/llm-gateway: not Accepted (False: Accepted set by the test), not ResolvedRefs (False: InvalidExtensionRef set by the test)", got[0].Detail)

	status("True", "True")
	got = checks()
	require.Len(t, got, 1)
	assert.True(t, got[0].OK, got[0].Detail)
	assert.Equal(t, "Gateway "+ns+"/llm-gateway: Accepted, ResolvedRefs", got[0].Detail)
}
