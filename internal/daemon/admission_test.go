package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// skipKnownWriters are the matchConditions of the auditor's webhook (as the chart ships them):
// the GitOps applier, the known controllers, nodes, Leases and Events are not sent.
var skipKnownWriters = []map[string]any{
	{"name": "not-the-applier", "expression": `!request.userInfo.username.startsWith('system:serviceaccount:argocd:')`},
	{"name": "not-a-controller", "expression": `!(request.userInfo.username.startsWith('system:serviceaccount:kube-system:') || request.userInfo.username.startsWith('system:node:') || request.userInfo.username in ['system:kube-controller-manager', 'system:kube-scheduler'])`},
	{"name": "not-leases-or-events", "expression": `!(request.resource.group == 'coordination.k8s.io' || request.resource.resource == 'events')`},
}

// validatingWebhook is a ValidatingWebhookConfiguration calling url for writes in namespaces,
// with CA bundle ca, failurePolicy, timeout seconds and more matchConditions.
func validatingWebhook(name, url string, ca []byte, namespaces []string, failurePolicy string, timeout int, conditions []map[string]any) string {
	cfg := map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
		"metadata": map[string]any{"name": name},
		"webhooks": []any{map[string]any{
			"name":                    name + ".auditor.platform.llm",
			"clientConfig":            map[string]any{"url": url, "caBundle": base64.StdEncoding.EncodeToString(ca)},
			"rules":                   []any{map[string]any{"operations": []string{"CREATE", "UPDATE", "DELETE"}, "apiGroups": []string{"*"}, "apiVersions": []string{"*"}, "resources": []string{"*", "*/scale"}, "scope": "Namespaced"}},
			"namespaceSelector":       map[string]any{"matchExpressions": []any{map[string]any{"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}}},
			"failurePolicy":           failurePolicy,
			"sideEffects":             "None",
			"timeoutSeconds":          timeout,
			"admissionReviewVersions": []string{"v1"},
			"matchConditions":         conditions,
		}},
	}
	b, _ := json.Marshal(cfg)
	return string(b)
}

// kubectlApply applies manifest as the admin, deleting what it made at the end of the test.
func kubectlApply(t *testing.T, manifest string) {
	t.Helper()
	cmd := cluster.Kubectl(context.Background(), "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() {
		cmd := cluster.Kubectl(context.Background(), "delete", "--ignore-not-found", "--wait=false", "-f", "-")
		cmd.Stdin = strings.NewReader(manifest)
		_ = cmd.Run()
	})
}

// kubectlAs runs kubectl as person (or the admin for "").
func kubectlAs(person string, args ...string) (string, error) {
	if person != "" {
		args = append([]string{"--context", person}, args...)
	}
	out, err := cluster.Kubectl(context.Background(), args...).CombinedOutput()
	return string(out), err
}

// messageWith waits for a chat message holding every one of subs.
func messageWith(t *testing.T, r *receiver, timeout time.Duration, subs ...string) string {
	t.Helper()
	var found string
	ok := assert.Eventually(t, func() bool {
		for _, m := range r.messages() {
			all := true
			for _, s := range subs {
				all = all && strings.Contains(m, s)
			}
			if all {
				found = m
				return true
			}
		}
		return false
	}, timeout, 50*time.Millisecond, "no message with %q:\n%s", subs, strings.Join(r.messages(), "\n---\n"))
	if !ok {
		t.FailNow()
	}
	return found
}

// messagesWith are the chat messages holding every one of subs.
func messagesWith(r *receiver, subs ...string) []string {
	var out []string
	for _, m := range r.messages() {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(m, s)
		}
		if all {
			out = append(out, m)
		}
	}
	return out
}

// TestAdmissionFedDaemonNamesThePerson: the daemon reads no audit log and no audit webhook; the
// API server calls its admission webhook (failurePolicy Ignore, sideEffects None, 2 s). alice's
// `kubectl edit`, bob's `kubectl set env` and alice's deletion reach chat naming each of them and
// the admission source, and blame names alice. bob's later edits, admitted by the auditor and
// then refused (by another webhook, which the API server calls beside the auditor's; by a
// ValidatingAdmissionPolicy, which it evaluates before any webhook), are blamed on nobody: the
// replicas stay alice's.
func TestAdmissionFedDaemonNamesThePerson(t *testing.T) {
	testcluster.Need(t)
	h := newHarness(t)
	cfg := h.config(t.TempDir())
	cfg.AuditEvents = AuditEventsConfig{Admission: &AdmissionConfig{Listen: "127.0.0.1:0",
		CertFile: filepath.Join(cluster.Dir, "apiserver.crt"), KeyFile: filepath.Join(cluster.Dir, "apiserver.key")}}
	require.NoError(t, cfg.validate())
	d := start(t, cfg)
	addr := d.d.AdmissionAddr()
	require.NotEmpty(t, addr)
	ca, err := os.ReadFile(filepath.Join(cluster.Dir, "ca.crt"))
	require.NoError(t, err)

	rag, api, probe := h.p.NS("rag"), h.p.NS("api"), h.p.Prefix+"-admission-probe"
	out, err := kubectlAs("", "create", "namespace", probe)
	require.NoError(t, err, out)
	t.Cleanup(func() { _, _ = kubectlAs("", "delete", "namespace", probe, "--wait=false") })
	name := h.p.Prefix + "-auditor-admission"
	kubectlApply(t, validatingWebhook(name, "https://"+addr+"/api/v1/admission", ca, []string{rag, api, probe}, "Ignore", 2, skipKnownWriters))
	// The API server picks the configuration up from its informer: wait until a write reaches us.
	_, err = kubectlAs("", "-n", probe, "create", "configmap", "probe")
	require.NoError(t, err)
	n := 0
	require.Eventually(t, func() bool {
		n++
		_, _ = kubectlAs("", "-n", probe, "annotate", "--overwrite", "configmap/probe", "n="+strings.Repeat("x", n))
		return len(d.d.people.Writes(auditlog.Object{Resource: "configmaps", Namespace: probe, Name: "probe"}, "")) > 0
	}, 30*time.Second, 200*time.Millisecond, "the API server never called the webhook; daemon log:\n%s", d.log.String())

	chat := h.receivers[0]
	out2, err := editAs("alice", rag, "statefulset/qdrant", `s/^  replicas: 1$/  replicas: 3/`)
	require.NoError(t, err, "%s", out2)
	m := messageWith(t, chat, 30*time.Second, "qdrant", "spec.replicas", "alice")
	assert.Contains(t, m, "named by the admission webhook")

	out, err = kubectlAs("bob", "-n", api, "set", "env", "deployment/rag-api", "AUDITOR_ADMISSION=bob")
	require.NoError(t, err, out)
	m = messageWith(t, chat, 30*time.Second, "rag-api", "AUDITOR_ADMISSION", "bob")
	assert.Contains(t, m, "named by the admission webhook")

	out, err = kubectlAs("alice", "-n", rag, "delete", "poddisruptionbudget/qdrant")
	require.NoError(t, err, out)
	if !assert.Eventually(t, func() bool { return len(messagesWith(chat, "Missing", "PodDisruptionBudget")) > 0 }, 30*time.Second, 50*time.Millisecond) {
		rep, _ := d.d.Report("prod")
		t.Fatalf("no message of the deletion; report: %s\ndaemon log:\n%s", jsonOf(rep), grep(d.log.String(), "isruption"))
	}
	m = messagesWith(chat, "Missing", "PodDisruptionBudget")[0]
	assert.Contains(t, m, "Deleted by:* alice")
	assert.Contains(t, m, "named by the admission webhook")

	// Refusals: another webhook denies bob's writes to StatefulSets (the API server calls it
	// beside the auditor's, so the auditor sees the write); a policy denies 9 replicas.
	deny := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		_ = json.NewDecoder(r.Body).Decode(&review)
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: false}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	cert, err := tls.LoadX509KeyPair(filepath.Join(cluster.Dir, "apiserver.crt"), filepath.Join(cluster.Dir, "apiserver.key"))
	require.NoError(t, err)
	deny.Listener, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deny.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	deny.StartTLS()
	t.Cleanup(deny.Close)
	kubectlApply(t, validatingWebhook(name+"-deny", deny.URL+"/", ca, []string{rag}, "Fail", 2,
		[]map[string]any{{"name": "bobs-statefulsets", "expression": `request.userInfo.username == 'bob' && request.resource.resource == 'statefulsets' && object.spec.replicas == 5`}}))
	kubectlApply(t, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy","metadata":{"name":"`+name+`-nine"},
"spec":{"failurePolicy":"Fail","matchConstraints":{"resourceRules":[{"apiGroups":["apps"],"apiVersions":["v1"],"operations":["UPDATE"],"resources":["statefulsets"]}]},
"validations":[{"expression":"object.spec.replicas != 9","message":"nine replicas refused"}]}}`)
	kubectlApply(t, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicyBinding","metadata":{"name":"`+name+`-nine"},
"spec":{"policyName":"`+name+`-nine","validationActions":["Deny"],"matchResources":{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"`+rag+`"}}}}}`)
	refused := func(replicas string) bool {
		out, err := kubectlAs("bob", "-n", rag, "patch", "statefulset/qdrant", "--dry-run=server", "--type=merge", `-p={"spec":{"replicas":`+replicas+`}}`)
		return err != nil && strings.Contains(out, "denied")
	}
	require.Eventually(t, func() bool { return refused("5") && refused("9") }, 30*time.Second, 200*time.Millisecond, "the refusals never took effect")

	for _, replicas := range []string{"5", "9"} {
		out, err := editAs("bob", rag, "statefulset/qdrant", `s/^  replicas: 3$/  replicas: `+replicas+`/`)
		require.Error(t, err, "bob's edit to %s must be refused:\n%s", replicas, out)
	}
	qdrant := auditlog.Object{Group: "apps", Resource: "statefulsets", Namespace: rag, Name: "qdrant"}
	require.Eventually(t, func() bool {
		for _, w := range d.d.people.Writes(qdrant, "") {
			if w.Actor.User == "bob" {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "the auditor saw bob's write the other webhook refused")
	var bobSaw []string
	for _, w := range d.d.people.Writes(qdrant, "") {
		if w.Actor.User == "bob" {
			for _, c := range w.Changes {
				bobSaw = append(bobSaw, c.Path+"="+jsonOf(c.To))
			}
		}
	}
	assert.Equal(t, []string{".spec.replicas=5"}, bobSaw, "the policy's refusal of 9 came before any webhook; the other webhook's of 5 beside the auditor's")

	// The admin's annotation makes the daemon audit qdrant again, after the refused writes.
	out, err = kubectlAs("", "-n", rag, "annotate", "statefulset/qdrant", "auditor-test/touch=1")
	require.NoError(t, err, out)
	var replicas *drift.Field
	require.Eventually(t, func() bool {
		rep, err := d.d.Report("prod")
		if err != nil {
			return false
		}
		replicas = nil
		touched := false
		for _, o := range rep.Objects {
			if o.Kind != "StatefulSet" || o.Name != "qdrant" {
				continue
			}
			for i, f := range o.Fields {
				touched = touched || strings.Contains(f.Path, "auditor-test/touch")
				if f.Path == ".spec.replicas" {
					replicas = &o.Fields[i]
				}
			}
		}
		return touched && replicas != nil
	}, 30*time.Second, 100*time.Millisecond)
	require.NotNil(t, replicas.Actor, "%s", jsonOf(replicas))
	assert.Equal(t, "alice", replicas.Actor.User, "bob's refused writes are not blamed")
	assert.Equal(t, auditlog.SourceAdmission, replicas.Actor.From)
	assert.Equal(t, int64(3), replicas.Live)

	b, status, err := d.d.blames.blame(context.Background(), blameAsk{env: "prod", ref: blame.Ref{Kind: "StatefulSet", Namespace: rag, Name: "qdrant"}})
	require.NoError(t, err, "status %d", status)
	var text bytes.Buffer
	require.NoError(t, blame.WriteText(&text, b))
	assert.Contains(t, text.String(), "by alice with kubectl-edit")
	assert.Contains(t, text.String(), "named by the admission webhook")
	assert.Contains(t, text.String(), "admitted; made only if the live object shows it", "bob's refused write is listed as admitted only")

	// auditor diff has no admission source of its own: --daemon takes the people from this one.
	diff := func(args ...string) (string, int) {
		cmd := exec.Command(auditorBinary(t), append([]string{"diff", "--env", "prod", "--repo", h.p.Dir, "--kubeconfig", cluster.Kubeconfig,
			"--cache-dir", "off"}, args...)...)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		require.NoError(t, err)
		return string(out), 0
	}
	out, code := diff("-o", "json", "--daemon", "http://"+d.d.Addr())
	require.Equal(t, 1, code, "%s", out)
	var rep drift.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	var people []string
	for _, o := range rep.Objects {
		if o.Actor != nil {
			people = append(people, o.Kind+"/"+o.Name+" "+o.Actor.User+" "+o.Actor.From)
		}
		for _, f := range o.Fields {
			if f.Actor != nil && (f.Path == ".spec.replicas" || strings.Contains(f.Path, "AUDITOR_ADMISSION")) {
				people = append(people, o.Kind+"/"+o.Name+" "+f.Path+" "+f.Actor.User+" "+f.Actor.From)
			}
		}
	}
	assert.ElementsMatch(t, []string{
		"StatefulSet/qdrant .spec.replicas alice admission",
		"Deployment/rag-api .spec.template.spec.containers[name=api].env[name=AUDITOR_ADMISSION] bob admission",
		"PodDisruptionBudget/qdrant alice admission",
	}, people, "auditor diff -o json names the people the admission webhook named")
	out, _ = diff("--daemon", "http://"+d.d.Addr())
	assert.Contains(t, out, "by alice with kubectl-edit", "auditor diff's text")
	assert.Contains(t, out, "(named by the admission webhook)", "auditor diff's text")
	out, _ = diff("-o", "json")
	assert.NotContains(t, out, `"actor"`, "without --daemon, auditor diff names nobody here")
}
