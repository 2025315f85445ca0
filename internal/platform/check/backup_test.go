package check

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	backupStore = `apiVersion: barmancloud.cnpg.io/v1
kind: ObjectStore
metadata: {name: pgvector, namespace: llm-rag}
spec: {retentionPolicy: 30d, configuration: {destinationPath: "s3://b/pgvector"}}`
	backupPlugins = `plugins: [{name: barman-cloud.cloudnative-pg.io, isWALArchiver: true, parameters: {barmanObjectName: pgvector}}]`
)

func backupCluster(spec string) string {
	return `apiVersion: postgresql.cnpg.io/v1
kind: Cluster
metadata: {name: pgvector, namespace: llm-rag}
spec: {instances: 2, ` + spec + `}`
}

func TestBackupOffsite(t *testing.T) {
	cases := []struct {
		name string
		objs string
		want []string // substrings, one per expected violation
	}{
		{"plugin WAL archiver with a retained ObjectStore", backupCluster(backupPlugins) + "\n---\n" + backupStore, nil},
		{"in-tree barmanObjectStore, no plugin (issue #15)",
			backupCluster(`backup: {retentionPolicy: 30d, barmanObjectStore: {destinationPath: "s3://backups/llm-platform/pgvector"}}`),
			[]string{
				"Cluster llm-rag/pgvector uses the in-tree spec.backup.barmanObjectStore, deprecated since CloudNativePG 1.26",
				"Cluster llm-rag/pgvector has no WAL archiver",
			}},
		{"in-tree barmanObjectStore beside the plugin",
			backupCluster(backupPlugins+`, backup: {barmanObjectStore: {destinationPath: "s3://b"}}`) + "\n---\n" + backupStore,
			[]string{"uses the in-tree spec.backup.barmanObjectStore"}},
		{"no backup at all", backupCluster(`storage: {size: 1Gi}`), []string{"Cluster llm-rag/pgvector has no WAL archiver"}},
		{"plugin listed but not the WAL archiver",
			backupCluster(`plugins: [{name: barman-cloud.cloudnative-pg.io, parameters: {barmanObjectName: pgvector}}]`) + "\n---\n" + backupStore,
			[]string{"has no WAL archiver"}},
		{"WAL archiver disabled",
			backupCluster(`plugins: [{name: barman-cloud.cloudnative-pg.io, enabled: false, isWALArchiver: true, parameters: {barmanObjectName: pgvector}}]`) + "\n---\n" + backupStore,
			[]string{"has no WAL archiver"}},
		{"ObjectStore not rendered", backupCluster(backupPlugins),
			[]string{"Cluster llm-rag/pgvector archives WAL to ObjectStore llm-rag/pgvector, which the env does not render"}},
		{"ObjectStore in another namespace", backupCluster(backupPlugins) + "\n---\n" + `apiVersion: barmancloud.cnpg.io/v1
kind: ObjectStore
metadata: {name: pgvector, namespace: llm-other}
spec: {retentionPolicy: 30d, configuration: {destinationPath: "s3://b"}}`,
			[]string{"which the env does not render"}},
		{"ObjectStore without retention", backupCluster(backupPlugins) + "\n---\n" + `apiVersion: barmancloud.cnpg.io/v1
kind: ObjectStore
metadata: {name: pgvector, namespace: llm-rag}
spec: {configuration: {destinationPath: "s3://b"}}`,
			[]string{"archives WAL to ObjectStore llm-rag/pgvector, which has no spec.retentionPolicy"}},
		{"Barman plugin without barmanObjectName",
			backupCluster(`plugins: [{name: barman-cloud.cloudnative-pg.io, isWALArchiver: true}]`),
			[]string{"names no ObjectStore (parameters.barmanObjectName)"}},
		{"ScheduledBackup on the in-tree method (issue #15)", `apiVersion: postgresql.cnpg.io/v1
kind: ScheduledBackup
metadata: {name: pgvector-nightly, namespace: llm-rag}
spec: {schedule: "0 0 2 * * *", method: barmanObjectStore, cluster: {name: pgvector}}`,
			[]string{"ScheduledBackup llm-rag/pgvector-nightly backs up with method barmanObjectStore: use method plugin"}},
		{"ScheduledBackup with the default method", `apiVersion: postgresql.cnpg.io/v1
kind: ScheduledBackup
metadata: {name: nightly, namespace: llm-rag}
spec: {schedule: "0 0 2 * * *", cluster: {name: pgvector}}`,
			[]string{"backs up with method barmanObjectStore (the default)"}},
		{"ScheduledBackup through the plugin", `apiVersion: postgresql.cnpg.io/v1
kind: ScheduledBackup
metadata: {name: nightly, namespace: llm-rag}
spec: {schedule: "0 0 2 * * *", method: plugin, pluginConfiguration: {name: barman-cloud.cloudnative-pg.io}, cluster: {name: pgvector}}`, nil},
		{"a Cluster of another group is not CNPG's", `{apiVersion: example.com/v1, kind: Cluster, metadata: {name: c}}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := backupOffsite(parseObjects(t, tc.objs))
			require.Len(t, got, len(tc.want), "violations: %+v", got)
			for i, w := range tc.want {
				assert.Equal(t, "backup-offsite", got[i].Rule)
				assert.Contains(t, got[i].Message, w)
			}
		})
	}
}

// TestCheckBackupOffsite puts back the in-tree Barman configuration of issue #15 (the Cluster's
// spec.backup.barmanObjectStore, no plugin, a ScheduledBackup on method barmanObjectStore):
// check fails in every env, naming the Cluster and the ScheduledBackup.
func TestCheckBackupOffsite(t *testing.T) {
	dir, commit, edit := repoCopy(t)
	edit("base/rag/pgvector.yaml", `  plugins:
    - name: barman-cloud.cloudnative-pg.io
      isWALArchiver: true
      parameters:
        barmanObjectName: pgvector
`, `  backup:
    retentionPolicy: 30d
    barmanObjectStore:
      destinationPath: s3://backups/llm-platform/pgvector
      s3Credentials:
        accessKeyId: {name: pgvector-backup-s3, key: ACCESS_KEY_ID}
        secretAccessKey: {name: pgvector-backup-s3, key: ACCESS_SECRET_KEY}
`)
	edit("base/rag/pgvector.yaml", `  method: plugin
  pluginConfiguration:
    name: barman-cloud.cloudnative-pg.io
`, "  method: barmanObjectStore\n")
	commit("CNPG back on the in-tree Barman Cloud")
	res := runCheck(t, dir)
	assert.False(t, res.Passed)
	for _, env := range res.Envs {
		var got []string
		for _, v := range env.Violations {
			if v.Rule == "backup-offsite" {
				got = append(got, v.Object+": "+v.Message)
			}
		}
		require.Len(t, got, 3, "%s: %v", env.Env, got)
		assert.Contains(t, got[0], "Cluster llm-rag/pgvector: Cluster llm-rag/pgvector uses the in-tree spec.backup.barmanObjectStore", env.Env)
		assert.Contains(t, got[1], "Cluster llm-rag/pgvector: Cluster llm-rag/pgvector has no WAL archiver", env.Env)
		assert.Contains(t, got[2], "ScheduledBackup llm-rag/pgvector-nightly: ScheduledBackup llm-rag/pgvector-nightly backs up with method barmanObjectStore", env.Env)
	}
}

// TestWaveOrderClusterNeedsItsObjectStore: a Cluster cannot archive (or recover) before the
// ObjectStore its Barman Cloud plugin names exists.
func TestWaveOrderClusterNeedsItsObjectStore(t *testing.T) {
	objs := parseObjects(t, `apiVersion: postgresql.cnpg.io/v1
kind: Cluster
metadata: {name: pgvector, namespace: llm-rag, annotations: {argocd.argoproj.io/sync-wave: "0"}}
spec:
  instances: 1
  plugins: [{name: barman-cloud.cloudnative-pg.io, isWALArchiver: true, parameters: {barmanObjectName: pgvector}}]
  externalClusters: [{name: archive, plugin: {name: barman-cloud.cloudnative-pg.io, parameters: {barmanObjectName: old-store, serverName: pgvector}}}]
---
apiVersion: barmancloud.cnpg.io/v1
kind: ObjectStore
metadata: {name: pgvector, namespace: llm-rag, annotations: {argocd.argoproj.io/sync-wave: "1"}}
spec: {retentionPolicy: 30d, configuration: {destinationPath: "s3://b"}}
---
apiVersion: barmancloud.cnpg.io/v1
kind: ObjectStore
metadata: {name: old-store, namespace: llm-rag, annotations: {argocd.argoproj.io/sync-wave: "2"}}
spec: {retentionPolicy: 30d, configuration: {destinationPath: "s3://old"}}`)
	got := waveOrder(objs)
	require.Len(t, got, 2, "%+v", got)
	assert.Contains(t, got[0].Message, "Cluster llm-rag/pgvector (sync wave 0) needs ObjectStore llm-rag/pgvector (sync wave 1, its spec.plugins)")
	assert.Contains(t, got[1].Message, "needs ObjectStore llm-rag/old-store (sync wave 2, its spec.externalClusters)")
	require.Empty(t, waveOrder(objs[:1]), "an ObjectStore the env does not render is not the wave rule's business")
}
