package check

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRefsResolve(t *testing.T) {
	// rag-api as issue 31 found it: its database URI from CloudNativePG's pgvector-app, which the
	// Cluster makes in llm-rag only.
	const ragAPI = `apiVersion: apps/v1
kind: Deployment
metadata: {name: rag-api, namespace: llm-api%s}
spec:
  template:
    spec:
      containers:
        - name: api
          env: [{name: DATABASE_URL, valueFrom: {secretKeyRef: {name: pgvector-app, key: uri}}}]`
	const cluster = `{apiVersion: postgresql.cnpg.io/v1, kind: Cluster, metadata: {name: pgvector, namespace: %s}, spec: {instances: 1%s}}`
	sprintf := func(tmpl string, args ...string) string {
		for _, a := range args {
			tmpl = strings.Replace(tmpl, "%s", a, 1)
		}
		return tmpl
	}
	pod := func(kind, spec string) string {
		tmpl := "template: {spec: " + spec + "}"
		if kind == "CronJob" {
			tmpl = "jobTemplate: {spec: {" + tmpl + "}}"
		}
		api := "apps/v1"
		if kind == "CronJob" || kind == "Job" {
			api = "batch/v1"
		}
		return "{apiVersion: " + api + ", kind: " + kind + ", metadata: {name: w, namespace: llm-batch}, spec: {" + tmpl + "}}"
	}
	cases := []struct {
		name   string
		stream []string
		want   []string // one message substring per violation
	}{
		{"a CloudNativePG Secret read from another namespace (issue 31)",
			[]string{sprintf(ragAPI, ""), sprintf(cluster, "llm-rag", "")},
			[]string{"Deployment llm-api/rag-api refers to Secret llm-api/pgvector-app (env DATABASE_URL of container api), which the render neither has nor makes in namespace llm-api: its pods never start"}},
		{"the Cluster's own namespace has <cluster>-app",
			[]string{strings.Replace(sprintf(ragAPI, ""), "llm-api", "llm-rag", 1), sprintf(cluster, "llm-rag", "")}, nil},
		{"no <cluster>-app when initdb names the owner's secret",
			[]string{strings.Replace(sprintf(ragAPI, ""), "llm-api", "llm-rag", 1), sprintf(cluster, "llm-rag", ", bootstrap: {initdb: {secret: {name: own}}}")},
			[]string{"refers to Secret llm-rag/pgvector-app"}},
		{"a SealedSecret's Secret, with the keys it seals",
			[]string{strings.Replace(sprintf(ragAPI, ""), "llm-api", "llm-rag", 1),
				`{apiVersion: bitnami.com/v1alpha1, kind: SealedSecret, metadata: {name: pgvector-app, namespace: llm-rag}, spec: {encryptedData: {uri: AgBy3i}}}`}, nil},
		{"a SealedSecret without the key read",
			[]string{strings.Replace(sprintf(ragAPI, ""), "llm-api", "llm-rag", 1),
				`{apiVersion: bitnami.com/v1alpha1, kind: SealedSecret, metadata: {name: pgvector-app, namespace: llm-rag}, spec: {encryptedData: {password: AgBy3i}}}`},
			[]string{`reads key "uri" of Secret llm-rag/pgvector-app`}},
		{"marked as made out of band",
			[]string{sprintf(ragAPI, ", annotations: {auditor.llm-gitops.io/external-refs: \"configmap/x, secret/pgvector-app\"}")}, nil},
		{"an annotation entry that is not kind/name",
			[]string{sprintf(ragAPI, ", annotations: {auditor.llm-gitops.io/external-refs: \"pgvector-app, secret/pgvector-app\"}")},
			[]string{`entry "pgvector-app" is not kind/name`}},
		{"an ExternalSecret's target, a Certificate's secretName, rendered ConfigMap and claim",
			[]string{pod("StatefulSet", `{containers: [{name: c, envFrom: [{secretRef: {name: db}}, {configMapRef: {name: env}}]}],
  volumes: [{name: tls, secret: {secretName: w-tls}}, {name: data, persistentVolumeClaim: {claimName: data}}, {name: key, projected: {sources: [{secret: {name: api-key}}]}}]}`),
				`{apiVersion: external-secrets.io/v1, kind: ExternalSecret, metadata: {name: db-source, namespace: llm-batch}, spec: {target: {name: db}}}`,
				`{apiVersion: external-secrets.io/v1, kind: ExternalSecret, metadata: {name: api-key, namespace: llm-batch}, spec: {}}`,
				`{apiVersion: cert-manager.io/v1, kind: Certificate, metadata: {name: w, namespace: llm-batch}, spec: {secretName: w-tls}}`,
				obj("ConfigMap", "v1", "llm-batch", "env", ""), obj("PersistentVolumeClaim", "v1", "llm-batch", "data", "")}, nil},
		{"every kind missing, in a CronJob",
			[]string{pod("CronJob", `{serviceAccountName: batch, priorityClassName: llm-batch, imagePullSecrets: [{name: pull}],
  containers: [{name: c, env: [{name: A, valueFrom: {configMapKeyRef: {name: cm, key: a}}}]}],
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}, {name: cfg, configMap: {name: cfg}}]}`)},
			[]string{
				"CronJob llm-batch/w refers to ServiceAccount llm-batch/batch (its pods' serviceAccountName), which the render neither has nor makes in namespace llm-batch: its pods are never created",
				"refers to PriorityClass llm-batch (its pods' priorityClassName), which the render neither has nor makes in the cluster: its pods are never created (admission",
				"refers to Secret llm-batch/pull (its pods' imagePullSecrets)",
				"refers to PersistentVolumeClaim llm-batch/data (volume data), which the render neither has nor makes in namespace llm-batch: its pods stay Pending",
				"refers to ConfigMap llm-batch/cfg (volume cfg)",
				"refers to ConfigMap llm-batch/cm (env A of container c)",
			}},
		{"optional references, the default ServiceAccount, kube-root-ca.crt, built-in and rendered PriorityClasses",
			[]string{pod("Job", `{serviceAccountName: default, priorityClassName: system-node-critical,
  containers: [{name: c, envFrom: [{secretRef: {name: maybe, optional: true}}], env: [{name: A, valueFrom: {secretKeyRef: {name: maybe2, key: a, optional: true}}}]}],
  volumes: [{name: ca, configMap: {name: kube-root-ca.crt}}, {name: o, secret: {secretName: maybe3, optional: true}}]}`),
				strings.Replace(pod("DaemonSet", `{priorityClassName: llm-batch, containers: [{name: c}]}`), "name: w,", "name: d,", 1),
				obj("PriorityClass", "scheduling.k8s.io/v1", "", "llm-batch", "")}, nil},
		{"a key the rendered Secret, ConfigMap, ExternalSecret or Certificate does not have",
			[]string{pod("Deployment", `{containers: [{name: c, env: [
    {name: A, valueFrom: {secretKeyRef: {name: db, key: pasword}}},
    {name: B, valueFrom: {configMapKeyRef: {name: env, key: mode}}},
    {name: C, valueFrom: {secretKeyRef: {name: api-key, key: token}}},
    {name: D, valueFrom: {secretKeyRef: {name: db, key: password}}},
    {name: E, valueFrom: {secretKeyRef: {name: db, key: other, optional: true}}}]}],
  volumes: [{name: tls, secret: {secretName: w-tls, items: [{key: tls.pem, path: p}]}},
    {name: ca, configMap: {name: kube-root-ca.crt, items: [{key: ca.crt, path: ca}]}},
    {name: all, projected: {sources: [{configMap: {name: env, items: [{key: level, path: l}]}}]}}]}`),
				`{apiVersion: v1, kind: Secret, metadata: {name: db, namespace: llm-batch}, stringData: {password: x}}`,
				`{apiVersion: v1, kind: ConfigMap, metadata: {name: env, namespace: llm-batch}, data: {level: info}}`,
				`{apiVersion: external-secrets.io/v1, kind: ExternalSecret, metadata: {name: api-key, namespace: llm-batch}, spec: {data: [{secretKey: key, remoteRef: {key: k}}]}}`,
				`{apiVersion: cert-manager.io/v1, kind: Certificate, metadata: {name: w, namespace: llm-batch}, spec: {secretName: w-tls}}`},
			[]string{
				`Deployment llm-batch/w reads key "pasword" of Secret llm-batch/db (env A of container c), which it does not have (its keys: password): its pods never start`,
				`reads key "mode" of ConfigMap llm-batch/env (env B of container c), which it does not have (its keys: level)`,
				`reads key "token" of Secret llm-batch/api-key (env C of container c), which it does not have (its keys: key)`,
				`reads key "tls.pem" of Secret llm-batch/w-tls (volume tls), which it does not have (its keys: ca.crt, tls.crt, tls.key)`,
			}},
		{"keys the render cannot know are not checked",
			[]string{pod("Deployment", `{containers: [{name: c, env: [
    {name: A, valueFrom: {secretKeyRef: {name: filled, key: token}}},
    {name: B, valueFrom: {secretKeyRef: {name: from, key: anything}}}]}]}`),
				`{apiVersion: v1, kind: Secret, metadata: {name: filled, namespace: llm-batch}, type: kubernetes.io/service-account-token}`,
				`{apiVersion: external-secrets.io/v1, kind: ExternalSecret, metadata: {name: from, namespace: llm-batch}, spec: {dataFrom: [{extract: {key: k}}]}}`}, nil},
		{"keys from a second producer, another owner, a keystore, an output format or out of band",
			[]string{strings.Replace(pod("Deployment", `{containers: [{name: c, env: [
    {name: A, valueFrom: {secretKeyRef: {name: web-tls, key: ca.crt}}},
    {name: B, valueFrom: {secretKeyRef: {name: db, key: username}}},
    {name: C, valueFrom: {secretKeyRef: {name: oob, key: extra}}},
    {name: D, valueFrom: {secretKeyRef: {name: ci-token, key: token}}}]}],
  volumes: [{name: ks, secret: {secretName: kafka-tls, items: [{key: keystore.p12, path: a}, {key: tls-combined.pem, path: b}]}}]}`),
				"namespace: llm-batch}", "namespace: llm-batch, annotations: {auditor.llm-gitops.io/external-refs: \"secret/oob\"}}", 1),
				`{apiVersion: cert-manager.io/v1, kind: Certificate, metadata: {name: web, namespace: llm-batch}, spec: {secretName: web-tls}}`,
				`{apiVersion: v1, kind: Secret, metadata: {name: web-tls, namespace: llm-batch}, type: kubernetes.io/tls, data: {tls.crt: "", tls.key: ""}}`,
				`{apiVersion: v1, kind: Secret, metadata: {name: db, namespace: llm-batch}, stringData: {password: x}}`,
				`{apiVersion: external-secrets.io/v1, kind: ExternalSecret, metadata: {name: db, namespace: llm-batch}, spec: {target: {name: db, creationPolicy: Merge}, data: [{secretKey: password}]}}`,
				`{apiVersion: v1, kind: Secret, metadata: {name: oob, namespace: llm-batch}, stringData: {a: x}}`,
				`{apiVersion: v1, kind: Secret, metadata: {name: ci-token, namespace: llm-batch, annotations: {kubernetes.io/service-account.name: ci}}, type: kubernetes.io/service-account-token, stringData: {note: managed}}`,
				`{apiVersion: cert-manager.io/v1, kind: Certificate, metadata: {name: kafka, namespace: llm-batch}, spec: {secretName: kafka-tls, keystores: {pkcs12: {create: true}}, additionalOutputFormats: [{type: CombinedPEM}]}}`},
			nil},
		{"a rendered object of another namespace does not count",
			[]string{pod("Deployment", `{containers: [{name: c, envFrom: [{configMapRef: {name: env}}]}]}`), obj("ConfigMap", "v1", "llm-api", "env", "")},
			[]string{"Deployment llm-batch/w refers to ConfigMap llm-batch/env (envFrom of container c)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := refsResolve(parseObjects(t, strings.Join(tc.stream, "\n---\n")))
			require.Len(t, got, len(tc.want), "violations: %+v", got)
			var msgs []string
			for _, v := range got {
				assert.Equal(t, "refs-resolve", v.Rule)
				assert.Contains(t, v.Message, v.Object, "the message names its object")
				msgs = append(msgs, v.Message)
			}
			for _, w := range tc.want {
				assert.Contains(t, strings.Join(msgs, "\n"), w)
			}
		})
	}
}

// TestCheckRefsResolve puts rag-api's reference to CloudNativePG's pgvector-app back (issue 31):
// auditor check fails in every env, naming rag-api.
func TestCheckRefsResolve(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("base/api/rag-api.yaml", "name: rag-api-database\n", "name: pgvector-app\n")
	commit("rag-api reads pgvector-app")
	res := runCheck(t, dir)
	assert.False(t, res.Passed)
	for _, env := range res.Envs {
		got := violations(env, "refs-resolve")
		require.Len(t, got, 1, "%s: %+v", env.Env, env.Violations)
		assert.Equal(t, "Deployment llm-api/rag-api", got[0].Object)
		assert.Contains(t, got[0].Message, "Secret llm-api/pgvector-app (env DATABASE_URL of container api)")
	}
}
