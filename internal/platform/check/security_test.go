package check

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	nsRestricted = `{apiVersion: v1, kind: Namespace, metadata: {name: llm-api, labels: {pod-security.kubernetes.io/enforce: restricted, pod-security.kubernetes.io/enforce-version: v1.37}}}`
	denyAPI      = `{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: default-deny, namespace: llm-api}, spec: {podSelector: {}, policyTypes: [Ingress, Egress]}}`
	dnsAPI       = `{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: allow-dns, namespace: llm-api}, spec: {podSelector: {}, policyTypes: [Egress], egress: [{to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: kube-system}}}], ports: [{protocol: UDP, port: 53}, {protocol: TCP, port: 53}]}]}}`
)

func TestNamespaceSecurity(t *testing.T) {
	ns := func(labels string) string {
		return `{apiVersion: v1, kind: Namespace, metadata: {name: llm-api, labels: {` + labels + `}}}`
	}
	policy := func(name, spec string) string {
		return `{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: ` + name + `, namespace: llm-api}, spec: ` + spec + `}`
	}
	cases := []struct {
		name     string
		objs     []string
		want     []string // violation message substrings, in order
		warnings []string
	}{
		{"restricted, pinned, closed, DNS open", []string{nsRestricted, denyAPI, dnsAPI}, nil, nil},
		{"no enforce label", []string{ns(`platform.llm/layer: api`), denyAPI, dnsAPI},
			[]string{"Namespace llm-api has no label pod-security.kubernetes.io/enforce"}, nil},
		{"not a level", []string{ns(`pod-security.kubernetes.io/enforce: strict, pod-security.kubernetes.io/enforce-version: v1.37`), denyAPI, dnsAPI},
			[]string{`pod-security.kubernetes.io/enforce: "strict", which is not a Pod Security level`}, nil},
		{"version not pinned", []string{ns(`pod-security.kubernetes.io/enforce: restricted`), denyAPI, dnsAPI},
			[]string{"Namespace llm-api enforces restricted with no pod-security.kubernetes.io/enforce-version (it defaults to latest)"}, nil},
		{"version latest", []string{ns(`pod-security.kubernetes.io/enforce: baseline, pod-security.kubernetes.io/enforce-version: latest`), denyAPI, dnsAPI},
			[]string{`enforces baseline with pod-security.kubernetes.io/enforce-version: "latest"`}, nil},
		{"privileged is a warning", []string{ns(`pod-security.kubernetes.io/enforce: privileged, pod-security.kubernetes.io/enforce-version: v1.37`), denyAPI, dnsAPI},
			nil, []string{"Namespace llm-api enforces privileged"}},
		{"no NetworkPolicy", []string{nsRestricted},
			[]string{"Namespace llm-api has no default-deny NetworkPolicy"}, nil},
		{"a deny of some pods is not a default deny", []string{nsRestricted, policy("deny-api", `{podSelector: {matchLabels: {app: api}}, policyTypes: [Ingress, Egress]}`), dnsAPI},
			[]string{"has no default-deny NetworkPolicy"}, nil},
		{"ingress only is not a default deny", []string{nsRestricted, policy("deny-in", `{podSelector: {}, policyTypes: [Ingress]}`), dnsAPI},
			[]string{"has no default-deny NetworkPolicy"}, nil},
		{"a deny with a rule allows something", []string{nsRestricted, policy("mostly", `{podSelector: {}, policyTypes: [Ingress, Egress], ingress: [{}]}`), dnsAPI},
			[]string{"has no default-deny NetworkPolicy"}, nil},
		{"default deny cuts DNS", []string{nsRestricted, denyAPI},
			[]string{"Namespace llm-api: NetworkPolicy default-deny denies all egress and no policy lets every pod reach DNS"}, nil},
		{"DNS over TCP only does not resolve", []string{nsRestricted, denyAPI, policy("dns-tcp", `{podSelector: {}, policyTypes: [Egress], egress: [{ports: [{protocol: TCP, port: 53}]}]}`)},
			[]string{"no policy lets every pod reach DNS"}, nil},
		{"DNS for some pods only", []string{nsRestricted, denyAPI, policy("dns-api", `{podSelector: {matchLabels: {app: api}}, policyTypes: [Egress], egress: [{ports: [{protocol: UDP, port: 53}]}]}`)},
			[]string{"no policy lets every pod reach DNS"}, nil},
		{"an egress rule without ports allows DNS", []string{nsRestricted, denyAPI, policy("all-out", `{podSelector: {}, policyTypes: [Egress], egress: [{to: [{ipBlock: {cidr: 10.0.0.0/8}}]}]}`)}, nil, nil},
		{"a port range covering 53", []string{nsRestricted, denyAPI, policy("low", `{podSelector: {}, policyTypes: [Egress], egress: [{ports: [{protocol: UDP, port: 1, endPort: 1024}]}]}`)}, nil, nil},
		{"a policy of another namespace does not count", []string{nsRestricted, strings.ReplaceAll(denyAPI, "namespace: llm-api", "namespace: llm-rag"), dnsAPI},
			[]string{"Namespace llm-api has no default-deny NetworkPolicy"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			posture, got, warn := namespaceSecurity(parseObjects(t, strings.Join(tc.objs, "\n---\n")))
			require.Len(t, got, len(tc.want), "violations: %+v", got)
			for i, w := range tc.want {
				assert.Equal(t, "Namespace llm-api", got[i].Object)
				assert.Contains(t, got[i].Message, w)
			}
			require.Len(t, warn, len(tc.warnings), "warnings: %+v", warn)
			for i, w := range tc.warnings {
				assert.Contains(t, warn[i].Message, w)
			}
			require.Len(t, posture, 1)
			assert.Equal(t, "llm-api", posture[0].Namespace)
		})
	}
}

func TestRestrictedPods(t *testing.T) {
	deploy := func(ns, pod string) string {
		return `{apiVersion: apps/v1, kind: Deployment, metadata: {name: rag-api, namespace: ` + ns + `}, spec: {template: {spec: ` + pod + `}}}`
	}
	const (
		podCtx = `securityContext: {runAsNonRoot: true, runAsUser: 10001, seccompProfile: {type: RuntimeDefault}}`
		ctrCtx = `securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}`
	)
	good := `{` + podCtx + `, containers: [{name: api, image: a:1, ` + ctrCtx + `}]}`
	baseline := `{apiVersion: v1, kind: Namespace, metadata: {name: llm-inference, labels: {pod-security.kubernetes.io/enforce: baseline}}}`
	cases := []struct {
		name string
		obj  string
		want []string // violation message substrings, one per violation
	}{
		{"restricted pod", deploy("llm-api", good), nil},
		{"container-level settings count too", deploy("llm-api", `{containers: [{name: api, image: a:1, securityContext: {runAsNonRoot: true, seccompProfile: {type: Localhost, localhostProfile: p.json}, allowPrivilegeEscalation: false, capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}}}]}`), nil},
		{"no securityContext at all", deploy("llm-api", `{containers: [{name: api, image: a:1}]}`),
			[]string{"Deployment llm-api/rag-api container api breaks Pod Security restricted, which namespace llm-api enforces (the API server will refuse its pods): securityContext.allowPrivilegeEscalation is not false; securityContext.capabilities.drop does not include \"ALL\"; runAsNonRoot is not true (set it in the pod's or the container's securityContext); seccompProfile.type is unset"}},
		{"container overrides runAsNonRoot", deploy("llm-api", `{`+podCtx+`, containers: [{name: api, image: a:1, securityContext: {runAsNonRoot: false, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}}]}`),
			[]string{"container api breaks", "runAsNonRoot is not true"}},
		{"root user", deploy("llm-api", `{`+podCtx+`, containers: [{name: api, image: a:1, securityContext: {runAsUser: 0, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}}]}`),
			[]string{"runAsUser is 0 (root)"}},
		{"escalation allowed", deploy("llm-api", `{`+podCtx+`, containers: [{name: api, image: a:1, securityContext: {allowPrivilegeEscalation: true, capabilities: {drop: [ALL]}}}]}`),
			[]string{"container api breaks", "allowPrivilegeEscalation is not false"}},
		{"capabilities kept", deploy("llm-api", `{`+podCtx+`, containers: [{name: api, image: a:1, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [NET_RAW]}}}]}`),
			[]string{`capabilities.drop does not include "ALL"`}},
		{"capability added", deploy("llm-api", `{`+podCtx+`, containers: [{name: api, image: a:1, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL], add: [SYS_ADMIN]}}}]}`),
			[]string{"capabilities.add has SYS_ADMIN"}},
		{"seccomp unconfined in the container", deploy("llm-api", `{`+podCtx+`, containers: [{name: api, image: a:1, securityContext: {seccompProfile: {type: Unconfined}, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}}]}`),
			[]string{"seccompProfile.type is Unconfined"}},
		{"privileged", deploy("llm-api", `{`+podCtx+`, containers: [{name: api, image: a:1, securityContext: {privileged: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}}]}`),
			[]string{"securityContext.privileged is true"}},
		{"host port", deploy("llm-api", `{`+podCtx+`, containers: [{name: api, image: a:1, ports: [{containerPort: 80, hostPort: 80}], `+ctrCtx+`}]}`),
			[]string{"hostPort 80 is set"}},
		{"init container", deploy("llm-api", `{`+podCtx+`, initContainers: [{name: migrate, image: a:1}], containers: [{name: api, image: a:1, `+ctrCtx+`}]}`),
			[]string{"Deployment llm-api/rag-api container migrate breaks"}},
		{"host network and a host path", deploy("llm-api", `{hostNetwork: true, `+podCtx+`, volumes: [{name: tmp, emptyDir: {}}, {name: sock, hostPath: {path: /run}}], containers: [{name: api, image: a:1, `+ctrCtx+`}]}`),
			[]string{"Deployment llm-api/rag-api pod breaks Pod Security restricted, which namespace llm-api enforces (the API server will refuse its pods): hostNetwork is true; volume sock is of type hostPath"}},
		{"a CronJob's pods", `{apiVersion: batch/v1, kind: CronJob, metadata: {name: reindex, namespace: llm-api}, spec: {jobTemplate: {spec: {template: {spec: {containers: [{name: job, image: a:1}]}}}}}}`,
			[]string{"CronJob llm-api/reindex container job breaks"}},
		{"a baseline namespace is not checked", baseline + "\n---\n" + deploy("llm-inference", `{containers: [{name: vllm, image: v:1}]}`), nil},
		{"a namespace the env does not render is not checked", deploy("elsewhere", `{containers: [{name: api, image: a:1}]}`), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := restrictedPods(parseObjects(t, nsRestricted+"\n---\n"+tc.obj))
			if len(tc.want) == 0 {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1, "%+v", got)
			assert.Equal(t, "pod-security-restricted", got[0].Rule)
			for _, w := range tc.want {
				assert.Contains(t, got[0].Message, w)
			}
		})
	}
}

// TestCheckSecurityOnHead: the repository as it is passes the security rules in every env, and
// the result says what each namespace enforces.
func TestCheckSecurityOnHead(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("overlays/prod/kustomization.yaml", "newTag: 1.4.2", "newTag: 1.4.3")
	commit("a harmless change")
	res := runCheck(t, dir)
	want := map[string]string{"llm-api": "restricted:v1.37", "llm-batch": "restricted:v1.37", "llm-inference": "baseline:v1.37",
		"llm-monitoring": "privileged:v1.37", "llm-rag": "restricted:v1.37", "llm-system": "restricted:v1.37"}
	for _, env := range res.Envs {
		assert.Empty(t, env.Violations, env.Env)
		got := map[string]string{}
		for _, s := range env.Security {
			got[s.Namespace] = s.PodSecurity
			assert.Equal(t, "default-deny", s.DefaultDeny, "%s %s", env.Env, s.Namespace)
			assert.Equal(t, "allow-dns", s.DNS, "%s %s", env.Env, s.Namespace)
		}
		assert.Equal(t, want, got, env.Env)
	}
	assert.True(t, res.Passed)
}

// TestCheckSecurityNegatives puts each bad pattern into a copy of the repository: check fails
// in every env, naming the object (and the container).
func TestCheckSecurityNegatives(t *testing.T) {
	cases := []struct {
		name     string
		file     string
		old, new string
		rule     string
		object   string
		msg      string
	}{
		{"namespace without its enforce label", "base/platform/namespaces.yaml",
			"    platform.llm/layer: api\n    pod-security.kubernetes.io/enforce: restricted\n", "    platform.llm/layer: api\n",
			"namespace-pod-security", "Namespace llm-api", "has no label pod-security.kubernetes.io/enforce"},
		{"enforce version latest", "base/platform/namespaces.yaml",
			"    pod-security.kubernetes.io/enforce: baseline\n    pod-security.kubernetes.io/enforce-version: v1.37\n",
			"    pod-security.kubernetes.io/enforce: baseline\n    pod-security.kubernetes.io/enforce-version: latest\n",
			"namespace-pod-security", "Namespace llm-inference", `enforce-version: "latest"`},
		{"namespace without a default deny", "base/network/defaults.yaml",
			"  name: default-deny\n  namespace: llm-rag\nspec:\n  podSelector: {}\n  policyTypes: [Ingress, Egress]\n",
			"  name: default-deny\n  namespace: llm-rag\nspec:\n  podSelector: {}\n  policyTypes: [Ingress]\n",
			"network-default-deny", "Namespace llm-rag", "has no default-deny NetworkPolicy"},
		{"default deny without DNS", "base/network/defaults.yaml",
			"  name: allow-dns\n  namespace: llm-batch\nspec:\n  podSelector: {}\n",
			"  name: allow-dns\n  namespace: llm-batch\nspec:\n  podSelector: {matchLabels: {app.kubernetes.io/name: reindex-corpus}}\n",
			"network-default-deny", "Namespace llm-batch", "NetworkPolicy default-deny denies all egress and no policy lets every pod reach DNS"},
		{"rag-api without runAsNonRoot", "base/api/rag-api.yaml", "        runAsNonRoot: true\n", "",
			"pod-security-restricted", "Deployment llm-api/rag-api", "container api breaks Pod Security restricted, which namespace llm-api enforces (the API server will refuse its pods): runAsNonRoot is not true"},
		{"a batch job that may escalate", "base/batch/reindex-corpus.yaml", "                allowPrivilegeEscalation: false\n", "",
			"pod-security-restricted", "CronJob llm-batch/reindex-corpus", "container job breaks Pod Security restricted"},
		{"inference enforcing restricted: vLLM runs as root", "base/platform/namespaces.yaml",
			"    pod-security.kubernetes.io/enforce: baseline\n", "    pod-security.kubernetes.io/enforce: restricted\n",
			"pod-security-restricted", "Deployment llm-inference/vllm-qwen", "container vllm breaks Pod Security restricted, which namespace llm-inference enforces (the API server will refuse its pods): runAsNonRoot is not true"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, commit, edit := repoCopy(t)
			edit(tc.file, tc.old, tc.new)
			commit(tc.name)
			res := runCheck(t, dir)
			assert.False(t, res.Passed)
			for _, env := range res.Envs {
				var got []Violation
				for _, v := range env.Violations {
					if v.Rule == tc.rule && v.Object == tc.object {
						got = append(got, v)
					}
				}
				require.NotEmpty(t, got, "%s: %+v", env.Env, env.Violations)
				assert.Contains(t, got[0].Message, tc.msg, env.Env)
			}
		})
	}
}
