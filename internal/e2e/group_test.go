package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/reposerver"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
	"github.com/llm-gitops/platform/internal/testing/testfixture"
)

// TestAppOfAppsAuditsEveryApplicationAndTheApplicationsThemselves: a root Application (an
// app-of-apps, synced by real Argo CD) declares the fixture's prod Application and a second one
// whose source is a plain directory (an admission policy, its binding, a ConfigMap). Right after
// the sync the group is in sync. Then, by hand: selfHeal turned off on the second Application,
// its binding deleted (the production gate gone), and an ignoreDifferences added to the live
// prod Application to hide the canary's image, which is then changed. Every one is drift of the
// Application that declares the object, and the root's findings are the resources Argo CD calls
// OutOfSync in the root's status.
func TestAppOfAppsAuditsEveryApplicationAndTheApplicationsThemselves(t *testing.T) {
	testcluster.Need(t)
	f := platform(t)
	root, extras, gate := f.Prefix+"-root-prod", f.Prefix+"-llm-extras", f.Prefix+"-gate"
	ns := f.NS("system")
	rootDir := "apps/" + f.Prefix + "-root"
	writeYAML(t, f, rootDir+"/"+f.App()+".yaml", f.ApplicationAsApplied().Object)
	writeYAML(t, f, rootDir+"/extras.yaml", map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": extras, "namespace": testcluster.ArgoCDNamespace,
			"finalizers": []any{"resources-finalizer.argocd.argoproj.io"}},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": "extras"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns},
			"syncPolicy": map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true},
				"syncOptions": []any{"ServerSideApply=true"}},
		},
	})
	// A Helm chart from a chart repository out of reach: not audited, and said so.
	chart := f.Prefix + "-llm-chart"
	writeYAML(t, f, rootDir+"/chart.yaml", map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": chart, "namespace": testcluster.ArgoCDNamespace},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": "https://charts.invalid/stable", "chart": "nothing", "targetRevision": "1.0.0"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns},
		},
	})
	// A chart of a chart repository (served here over HTTP), at a version constraint: Argo CD's
	// repo-server and the auditor each fetch it.
	repoApp := f.Prefix + "-llm-repo"
	charts := chartRepository(t, "svc", map[string]map[string]string{
		"0.1.0": {"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  version: old\n"},
		"0.1.1": {"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  version: {{ .Chart.Version | quote }}\n  size: {{ .Values.size | quote }}\n",
			"values.yaml": "size: small\n"},
	})
	writeYAML(t, f, rootDir+"/repo.yaml", childApp(repoApp, ns, map[string]any{
		"source": map[string]any{"repoURL": charts, "chart": "svc", "targetRevision": "0.1.*",
			"helm": map[string]any{"releaseName": f.Prefix + "-svc", "parameters": []any{map[string]any{"name": "size", "value": "large"}}}},
	}))
	require.NoError(t, f.Write("extras/gate.yaml", fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: %[1]s
spec:
  failurePolicy: Fail
  matchConstraints:
    namespaceSelector:
      matchLabels:
        %[1]s: "on"
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["configmaps"]
  validations:
    - expression: "object.metadata.name != 'forbidden'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: %[1]s
spec:
  policyName: %[1]s
  validationActions: [Deny]
`, gate)))
	// A Helm chart in Git, with the Application's value files, values and parameters, a hook
	// Argo CD runs before the sync (and leaves in place) and a template on the cluster's version.
	helmApp := f.Prefix + "-llm-helm"
	writeYAML(t, f, rootDir+"/helm.yaml", childApp(helmApp, ns, map[string]any{
		"source": map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": "charts/api",
			"helm": map[string]any{
				"releaseName":  f.Prefix + "-api",
				"valueFiles":   []any{"values-prod.yaml"},
				"valuesObject": map[string]any{"tier": "gold"},
				"parameters":   []any{map[string]any{"name": "greeting", "value": "hi,there"}, map[string]any{"name": "revision", "value": "$ARGOCD_APP_REVISION_SHORT"}},
			}},
	}))
	// The same chart from a multi-source Application: its value file from a ref source, and a
	// plain directory as a third source.
	multi := f.Prefix + "-llm-multi"
	writeYAML(t, f, rootDir+"/multi.yaml", childApp(multi, ns, map[string]any{
		"sources": []any{
			map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": "charts/api",
				"helm": map[string]any{"releaseName": f.Prefix + "-multi", "valueFiles": []any{"$settings/envs/multi.yaml"}}},
			map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "ref": "settings"},
			map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": "extras-multi"},
		},
	}))
	// A kustomization with the Application's kustomize options (name prefix, image, labels,
	// replicas), applied by Argo CD with kustomize edit.
	kust := f.Prefix + "-llm-kust"
	writeYAML(t, f, rootDir+"/kust.yaml", childApp(kust, ns, map[string]any{
		"source": map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": "extras-kust",
			"kustomize": map[string]any{
				"namePrefix":   f.Prefix + "-k-",
				"images":       []any{"registry.example.com/llm/worker:$ARGOCD_APP_REVISION_SHORT"},
				"commonLabels": map[string]any{"tier": "gold"},
				"replicas":     []any{map[string]any{"name": "worker", "count": 3}},
			}},
	}))
	require.NoError(t, f.Write("extras-kust/kustomization.yaml", "resources: [worker.yaml]\n"))
	require.NoError(t, f.Write("extras-kust/worker.yaml", `apiVersion: apps/v1
kind: Deployment
metadata: {name: worker}
spec:
  replicas: 1
  selector: {matchLabels: {app: worker}}
  template:
    metadata: {labels: {app: worker}}
    spec:
      containers: [{name: worker, image: registry.example.com/llm/worker:0.1}]
`))
	require.NoError(t, f.Write("envs/multi.yaml", "greeting: from-the-ref-source\nreplicas: 3\n"))
	require.NoError(t, f.Write("extras-multi/limits.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: "+f.Prefix+"-multi-limits\ndata:\n  max: \"10\"\n"))
	for name, content := range map[string]string{
		"charts/api/Chart.yaml":          "apiVersion: v2\nname: api\nversion: 0.1.0\nappVersion: \"1.0\"\n",
		"charts/api/values.yaml":         "replicas: 1\ngreeting: hello\ntier: bronze\nrevision: none\n",
		"charts/api/values-prod.yaml":    "replicas: 2\n",
		"charts/api/templates/NOTES.txt": "{{ .Release.Name }} installed\n",
		"charts/api/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels: {app: {{ .Release.Name }}, chart: "{{ .Chart.Name }}-{{ .Chart.Version }}"}
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec:
      containers:
        - name: api
          image: registry.example.com/llm/api:{{ .Chart.AppVersion }}
`,
		"charts/api/templates/service.yaml": `apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
spec:
  selector: {app: {{ .Release.Name }}}
  ports: [{port: 80, targetPort: 8080}]
`,
		"charts/api/templates/config.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  greeting: {{ .Values.greeting | quote }}
  tier: {{ .Values.tier | quote }}
  revision: {{ .Values.revision | quote }}
  namespace: {{ .Release.Namespace }}
  kube: "{{ .Capabilities.KubeVersion.Major }}.{{ .Capabilities.KubeVersion.Minor }}"
  monitoring: "{{ .Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor" }}"
`,
		"charts/api/templates/hook.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-before
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-delete-policy: before-hook-creation
data:
  ran: "yes"
`,
	} {
		require.NoError(t, f.Write(name, content))
	}
	require.NoError(t, f.Write("extras/settings.json", `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "extras"}, "data": {"mode": "strict"}}`))
	head := f.Commit("a root Application over prod and extras")
	rootApp := map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": root, "namespace": testcluster.ArgoCDNamespace},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": rootDir},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": testcluster.ArgoCDNamespace},
			"syncPolicy": map[string]any{"automated": map[string]any{"prune": false, "selfHeal": false},
				"syncOptions": []any{"ServerSideApply=true"}},
		},
	}
	file := filepath.Join(t.TempDir(), "root.yaml")
	data, err := yaml.Marshal(rootApp)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, data, 0o644))
	f.Kubectl("apply", "--server-side", "-f", file)
	t.Cleanup(func() { // the root orphans what it declares; the extras Application cascades
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "application", root, "--ignore-not-found", "--wait=false")
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "application", chart, "--ignore-not-found", "--wait=false")
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "application", extras, helmApp, multi, kust, repoApp, "--ignore-not-found", "--wait=true", "--timeout=2m")
	})
	ctx := context.Background()
	require.NoError(t, cluster.WaitSynced(ctx, root, head, 4*time.Minute))
	require.NoError(t, cluster.WaitSynced(ctx, extras, head, 4*time.Minute))
	require.NoError(t, cluster.WaitSynced(ctx, helmApp, head, 4*time.Minute))
	require.NoError(t, cluster.WaitSynced(ctx, multi, head, 4*time.Minute))
	require.NoError(t, cluster.WaitSynced(ctx, kust, head, 4*time.Minute))
	require.NoError(t, cluster.WaitSynced(ctx, repoApp, "0.1.1", 4*time.Minute), "Argo CD resolves 0.1.* to 0.1.1")
	// The root's own comparison of the Applications it declares, after they have settled (under
	// load it can lag their sync): Argo CD's verdict is reported beside the auditor's.
	waitFor(t, "Argo CD compares the root in sync", func() bool {
		st, _, _ := unstructured.NestedString(getApp(t, root).Object, "status", "sync", "status")
		return st == "Synced" && len(outOfSyncResources(getApp(t, root))) == 0
	})

	a := newAuditor(t, f)
	a.RootName = func(string) string { return root }
	rep := runAudit(t, a, f.Env)
	byName := map[string]drift.Application{}
	for _, app := range rep.Applications {
		byName[app.Name] = app
	}
	require.Contains(t, byName, chart, "Applications audited: %+v", rep.Applications)
	assert.Contains(t, byName[chart].Error, "chart repository https://charts.invalid/stable")
	require.Len(t, rep.Objects, 1, "right after Argo CD's sync, only the chart Application the auditor cannot render:\n%s", dump(rep))
	assert.Equal(t, drift.Unknown, rep.Objects[0].Status)
	assert.Equal(t, chart, rep.Objects[0].Name)
	assert.Equal(t, root, rep.Objects[0].Application)
	assert.False(t, rep.InSync, "an Application not audited is not in sync")
	for _, name := range []string{root, f.App(), extras, helmApp, multi, kust, repoApp} {
		require.Contains(t, byName, name, "Applications audited: %+v", rep.Applications)
		assert.Empty(t, byName[name].Error, name)
		assert.Positive(t, byName[name].Objects, name)
	}
	assert.Equal(t, 3, byName[extras].Objects, "the directory's objects (the policy, its binding, a ConfigMap from JSON): %+v", byName[extras])
	// Each Application as the auditor renders it is what Argo CD's repo-server renders for it.
	assertRenderParity(t, a, f.Env, []string{root, f.App(), extras, helmApp, multi, kust, repoApp})
	// The same audit by Argo CD's repo-server as the render engine: the same verdicts, and the
	// chart of an unreachable repository is Unknown with the repo-server's reason.
	ra := newAuditor(t, f)
	ra.RootName = a.RootName
	client, err := reposerver.New(reposerver.Config{Address: cluster.RepoServer, Plaintext: true})
	require.NoError(t, err)
	ra.RepoServer = client
	rrep := runAudit(t, ra, f.Env)
	assert.Equal(t, engineSummary(rep), engineSummary(rrep), "in process, then by the repo-server")
	assert.Equal(t, every(engines(rep), audit.RenderedInProcess), engines(rep), "each Application says which engine rendered it")
	assert.Equal(t, every(engines(rep), audit.RenderedByRepoServer), engines(rrep), "the same Applications, each by the repo-server")
	// Argo CD's repo-server unreachable: the engine in process renders each Application, saying
	// so, and the verdicts are the same.
	da := newAuditor(t, f)
	da.RootName = a.RootName
	da.RepoServer, err = reposerver.New(reposerver.Config{Address: unusedAddress(t), Plaintext: true})
	require.NoError(t, err)
	drep := runAudit(t, da, f.Env)
	assert.Equal(t, engineSummary(rep), engineSummary(drep), "in process, then in process for want of the repo-server")
	fellBack := engines(drep)
	for name, engine := range fellBack {
		assert.True(t, strings.HasPrefix(engine, audit.RenderedInProcess+" (repo-server unreachable: "), "%s: %s", name, engine)
		fellBack[name] = "in process, saying why"
	}
	assert.Equal(t, every(engines(rep), "in process, saying why"), fellBack)
	// The chart's objects are the ones Argo CD tracks (its hook is neither audited nor Extra),
	// and in sync with them: the in-process render is the repo-server's, values and all.
	tracked := trackedResources(getApp(t, helmApp))
	assert.Equal(t, map[string]bool{"ConfigMap " + ns + "/" + f.Prefix + "-api-config": true, "Deployment " + ns + "/" + f.Prefix + "-api": true,
		"Service " + ns + "/" + f.Prefix + "-api": true}, tracked, "what Argo CD tracks of the chart")
	assert.Equal(t, len(tracked), byName[helmApp].Objects, "the chart's objects audited")
	cm := f.Kubectl("-n", ns, "get", "configmap", f.Prefix+"-api-config", "-o", "jsonpath={.data}")
	for _, want := range []string{`"greeting":"hi,there"`, `"tier":"gold"`, `"revision":"` + head[:7] + `"`, `"namespace":"` + ns + `"`, `"monitoring":"true"`} {
		assert.Contains(t, cm, want, "Argo CD's render, which the auditor's matched")
	}
	f.Kubectl("-n", ns, "get", "configmap", f.Prefix+"-api-before") // the hook ran and stays
	assert.Equal(t, map[string]bool{"Deployment " + ns + "/" + f.Prefix + "-k-worker": true}, trackedResources(getApp(t, kust)))
	assert.Equal(t, 1, byName[kust].Objects)
	assert.Equal(t, map[string]bool{"ConfigMap " + ns + "/" + f.Prefix + "-svc": true}, trackedResources(getApp(t, repoApp)))
	assert.Equal(t, 1, byName[repoApp].Objects)
	assert.Equal(t, "0.1.1", byName[repoApp].Revision, "the version Argo CD resolved and synced")
	assert.Equal(t, `{"size":"large","version":"0.1.1"}`, f.Kubectl("-n", ns, "get", "configmap", f.Prefix+"-svc", "-o", "jsonpath={.data}"))
	w := f.Kubectl("-n", ns, "get", "deploy", f.Prefix+"-k-worker", "-o", "jsonpath={.spec.replicas} {.metadata.labels.tier} {.spec.template.spec.containers[0].image}")
	assert.Equal(t, "3 gold registry.example.com/llm/worker:"+head[:7], w, "Argo CD's kustomize edits, which the auditor's render matched")
	trackedMulti := trackedResources(getApp(t, multi))
	assert.Len(t, trackedMulti, 4, "the chart's three objects and the directory's ConfigMap: %v", trackedMulti)
	assert.Equal(t, len(trackedMulti), byName[multi].Objects, "the multi-source Application's objects audited")
	assert.Contains(t, f.Kubectl("-n", ns, "get", "configmap", f.Prefix+"-multi-config", "-o", "jsonpath={.data.greeting}"), "from-the-ref-source")

	// By hand: selfHeal off on extras (its later hand edits stand), then the gate removed.
	f.Kubectl("-n", testcluster.ArgoCDNamespace, "patch", "application", extras, "--type=merge",
		`-p={"spec":{"syncPolicy":{"automated":{"selfHeal":false}}}}`)
	waitFor(t, "Argo CD reads extras' new sync policy", func() bool {
		sh, found, _ := unstructured.NestedBool(getApp(t, extras).Object, "spec", "syncPolicy", "automated", "selfHeal")
		return found && !sh
	})
	f.Kubectl("delete", "validatingadmissionpolicybinding", gate)
	// An exemption added to the live prod Application for the canary's image, then the image.
	f.Kubectl("-n", testcluster.ArgoCDNamespace, "patch", "application", f.App(), "--type=json",
		`-p=[{"op":"add","path":"/spec/ignoreDifferences/-","value":{"group":"apps","kind":"Deployment","name":"vllm-qwen-canary","jsonPointers":["/spec/template/spec/containers/0/image"]}}]`)
	f.Kubectl("-n", f.NS("inference"), "set", "image", "deploy/vllm-qwen-canary", "vllm=registry.example.com/llm/vllm:6.6.6")
	// The chart's Deployment scaled by hand, its Service deleted.
	f.Kubectl("-n", ns, "scale", "deploy/"+f.Prefix+"-api", "--replicas=5")
	f.Kubectl("-n", ns, "delete", "service", f.Prefix+"-api")
	// The chart repository's ConfigMap edited by hand.
	f.Kubectl("-n", ns, "patch", "configmap", f.Prefix+"-svc", "--type=merge", `-p={"data":{"size":"tiny"}}`)
	// The kustomize Application's image (set by its options) changed by hand.
	f.Kubectl("-n", ns, "set", "image", "deploy/"+f.Prefix+"-k-worker", "worker=registry.example.com/llm/worker:hand")
	// The multi-source Application's ConfigMap from the ref source's value edited by hand.
	f.Kubectl("-n", ns, "patch", "configmap", f.Prefix+"-multi-config", "--type=merge", `-p={"data":{"greeting":"by-hand"}}`)

	rep = runAudit(t, a, f.Env)
	got := map[string]string{}
	for _, o := range rep.Objects {
		got[o.Kind+" "+o.Name] = o.Application + " " + o.Status
	}
	want := map[string]string{
		"Application " + chart:                     root + " Unknown",
		"Application " + extras:                    root + " Modified",
		"Application " + f.App():                   root + " Modified",
		"ValidatingAdmissionPolicyBinding " + gate: extras + " Missing",
		"Deployment vllm-qwen-canary":              f.App() + " Modified",
		"Deployment " + f.Prefix + "-api":          helmApp + " Modified",
		"Service " + f.Prefix + "-api":             helmApp + " Missing",
		"ConfigMap " + f.Prefix + "-multi-config":  multi + " Modified",
		"Deployment " + f.Prefix + "-k-worker":     kust + " Modified",
		"ConfigMap " + f.Prefix + "-svc":           repoApp + " Modified",
	}
	assert.Empty(t, cmp.Diff(want, got), "drift by Application (-want +got):\n%s", dump(rep))
	assert.Equal(t, engineSummary(rep), engineSummary(runAudit(t, ra, f.Env)), "the hand edits, in process and by the repo-server")
	for _, o := range rep.Objects {
		switch o.Kind + " " + o.Name {
		case "Application " + extras:
			assert.True(t, hasPath(o, ".spec.syncPolicy.automated.selfHeal"), "%+v", o.Fields)
			assert.Contains(t, o.Note, "selfHeal turned off")
		case "Application " + f.App():
			assert.True(t, hasPath(o, ".spec.ignoreDifferences"), "%+v", o.Fields)
			assert.Contains(t, o.Note, "ignoreDifferences")
		case "Deployment vllm-qwen-canary":
			assert.True(t, hasPath(o, ".spec.template.spec.containers[name=vllm].image"), "the live exemption excuses nothing: %+v", o.Fields)
		case "Deployment " + f.Prefix + "-api":
			require.Len(t, o.Fields, 1, "%+v", o.Fields)
			assert.Equal(t, ".spec.replicas", o.Fields[0].Path)
			assert.Equal(t, "2", fmt.Sprint(o.Fields[0].Desired), "the value file's, as Argo CD rendered it")
			assert.Equal(t, "5", fmt.Sprint(o.Fields[0].Live))
			assert.True(t, strings.HasPrefix(o.Fields[0].Manager, "kubectl"), "the writer: %+v", o.Fields[0])
		case "ConfigMap " + f.Prefix + "-multi-config":
			require.Len(t, o.Fields, 1, "%+v", o.Fields)
			assert.Equal(t, "from-the-ref-source", fmt.Sprint(o.Fields[0].Desired), "the ref source's value file")
		}
	}
	// The charts' findings are what Argo CD calls OutOfSync in their status.
	for app, n := range map[string]int{helmApp: 2, multi: 1, kust: 1, repoApp: 1} {
		theirs := map[string]bool{}
		waitFor(t, "Argo CD compares "+app+" with the hand-edited cluster", func() bool {
			theirs = outOfSyncResources(getApp(t, app))
			return len(theirs) >= n
		})
		ours := map[string]bool{}
		for _, o := range rep.Objects {
			if o.Application == app {
				ours[o.Kind+" "+o.Namespace+"/"+o.Name] = true
			}
		}
		assert.Empty(t, cmp.Diff(theirs, ours), "%s's drift (-Argo CD +auditor)", app)
	}
	// The root's findings are what Argo CD calls OutOfSync in the root's status.
	theirs := map[string]bool{}
	waitFor(t, "Argo CD compares the root with the hand-edited Applications", func() bool {
		theirs = outOfSyncResources(getApp(t, root))
		return len(theirs) >= 2
	})
	ours := map[string]bool{}
	for _, o := range rep.Objects {
		if o.Application == root && o.Status != drift.Unknown { // Argo CD compares the chart's Application object; the auditor could not render its chart
			ours[o.Kind+" "+o.Namespace+"/"+o.Name] = true
		}
	}
	assert.Empty(t, cmp.Diff(theirs, ours), "the root's drift (-Argo CD +auditor)")
}

// chartRepository serves a Helm chart repository over HTTP for the test's life: index.yaml and
// one archive per version of chart name (files: path in the chart → content). It returns its URL.
func chartRepository(t *testing.T, name string, versions map[string]map[string]string) string {
	t.Helper()
	repo := newChartRepo(t, name)
	for v, files := range versions {
		repo.publish(t, v, files)
	}
	return repo.url
}

// chartRepo is a Helm chart repository served over HTTP for the test's life, of one chart; a
// version published is in its index from then on.
type chartRepo struct {
	url, name string
	mu        sync.Mutex
	archives  map[string][]byte
	entries   []any
}

func newChartRepo(t *testing.T, name string) *chartRepo {
	r := &chartRepo{name: name, archives: map[string][]byte{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if req.URL.Path == "/index.yaml" {
			index, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "entries": map[string]any{name: r.entries}})
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			_, _ = w.Write(index)
			return
		}
		if data, ok := r.archives[req.URL.Path]; ok {
			_, _ = w.Write(data)
			return
		}
		http.NotFound(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// publish adds version v of the chart, of files (path in the chart → content) and its Chart.yaml.
func (r *chartRepo) publish(t *testing.T, v string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	all := map[string]string{"Chart.yaml": "apiVersion: v2\nname: " + r.name + "\nversion: " + v + "\n"}
	for p, c := range files {
		all[p] = c
	}
	for p, c := range all {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: r.name + "/" + p, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(c))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	file := r.name + "-" + v + ".tgz"
	r.mu.Lock()
	defer r.mu.Unlock()
	r.archives["/"+file] = buf.Bytes()
	r.entries = append(r.entries, map[string]any{"apiVersion": "v2", "name": r.name, "version": v, "urls": []any{file}})
}

// childApp is an Application the root declares: spec's sources, synced to ns by automated sync
// (prune, no self-heal) with server-side apply, its objects deleted with it.
func childApp(name, ns string, spec map[string]any) map[string]any {
	spec["project"] = "default"
	spec["destination"] = map[string]any{"server": "https://kubernetes.default.svc", "namespace": ns}
	spec["syncPolicy"] = map[string]any{"automated": map[string]any{"prune": true, "selfHeal": false},
		"syncOptions": []any{"ServerSideApply=true"}}
	return map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": name, "namespace": testcluster.ArgoCDNamespace,
			"finalizers": []any{"resources-finalizer.argocd.argoproj.io"}},
		"spec": spec,
	}
}

// applyRoot applies the root Application root over rootDir of the fixture's repository, without
// a finalizer (the root orphans what it declares), and deletes it when the test ends: before
// the cleanups registered earlier, so that it no longer syncs the Applications they delete.
func applyRoot(t *testing.T, f *testfixture.Platform, root, rootDir string) {
	t.Helper()
	rootApp := childApp(root, testcluster.ArgoCDNamespace, map[string]any{
		"source": map[string]any{"repoURL": "file://" + f.Dir, "targetRevision": "main", "path": rootDir},
	})
	delete(rootApp["metadata"].(map[string]any), "finalizers")
	applyObject(t, f, rootApp)
	t.Cleanup(func() {
		f.Kubectl("-n", testcluster.ArgoCDNamespace, "delete", "application", root, "--ignore-not-found", "--wait=false")
	})
}

// waitComparedSynced waits until Argo CD's last comparison of app (in its namespace) says Synced.
// A root's sync can succeed while a child it made still runs its own sync: the root then calls
// the child OutOfSync (its operation field) until it compares again.
func waitComparedSynced(t *testing.T, f *testfixture.Platform, app string) {
	t.Helper()
	require.Eventually(t, func() bool {
		return f.Kubectl("-n", testcluster.ArgoCDNamespace, "get", "application", app, "-o", "jsonpath={.status.sync.status}") == "Synced"
	}, 2*time.Minute, 500*time.Millisecond, "Argo CD never compared %s Synced", app)
}

func writeYAML(t *testing.T, f *testfixture.Platform, rel string, obj map[string]any) {
	t.Helper()
	if len(obj) == 0 {
		return
	}
	data, err := yaml.Marshal(obj)
	require.NoError(t, err)
	require.NoError(t, f.Write(rel, string(data)))
}

func runAudit(t *testing.T, a *audit.Auditor, env string) *drift.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := a.Run(ctx, audit.Request{Env: env})
	require.NoError(t, err)
	return rep
}

func getApp(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	dyn, err := cluster.Dynamic()
	require.NoError(t, err)
	u, err := dyn.Resource(testcluster.ApplicationGVR).Namespace(testcluster.ArgoCDNamespace).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return u
}

// trackedResources are the resources of an Application's status Argo CD compares: its hooks,
// listed with hook: true, are not.
func trackedResources(app *unstructured.Unstructured) map[string]bool {
	out := map[string]bool{}
	resources, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	for _, r := range resources {
		m := r.(map[string]any)
		if m["hook"] == true {
			continue
		}
		ns, _ := m["namespace"].(string)
		out[m["kind"].(string)+" "+ns+"/"+m["name"].(string)] = true
	}
	return out
}

func outOfSyncResources(app *unstructured.Unstructured) map[string]bool {
	out := map[string]bool{}
	resources, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	for _, r := range resources {
		m := r.(map[string]any)
		if m["status"] == "OutOfSync" {
			ns, _ := m["namespace"].(string)
			out[m["kind"].(string)+" "+ns+"/"+m["name"].(string)] = true
		}
	}
	return out
}

// hasPath says whether o drifted at path or inside it.
func hasPath(o drift.Object, path string) bool {
	for _, f := range o.Fields {
		if f.Path == path || strings.HasPrefix(f.Path, path+".") || strings.HasPrefix(f.Path, path+"[") {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) { return ok(), nil })
	require.NoError(t, err, what)
}
