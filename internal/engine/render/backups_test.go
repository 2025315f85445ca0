package render

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// backupDestinations returns where an object ships backups: an ObjectStore's destinationPath,
// and the BACKUP_URI of a CronJob's containers (the Qdrant snapshot job), keyed by what it is.
func backupDestinations(o *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	switch o.GetKind() {
	case "ObjectStore":
		if d, _, _ := unstructured.NestedString(o.Object, "spec", "configuration", "destinationPath"); d != "" {
			out["destinationPath"] = d
		}
	case "CronJob":
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "jobTemplate", "spec", "template", "spec", "containers")
		for _, c := range cs {
			env, _, _ := unstructured.NestedSlice(c.(map[string]any), "env")
			for _, e := range env {
				if em := e.(map[string]any); em["name"] == "BACKUP_URI" {
					out["BACKUP_URI"], _ = em["value"].(string)
				}
			}
		}
	}
	return out
}

// TestOverlaysBackUpToTheirOwnBucket: every env ships pgvector's WAL archive and base backups and
// Qdrant's snapshots to a bucket of its own (two envs in one path would mix their WAL archives,
// and dev's retention would delete prod's backups).
func TestOverlaysBackUpToTheirOwnBucket(t *testing.T) {
	seen := map[string]string{} // destination -> env
	for _, env := range envs {
		got := map[string]string{}
		for _, o := range renderRepo(t, env).Objects {
			for what, uri := range backupDestinations(o) {
				got[o.GetKind()+" "+o.GetName()+" "+what] = uri
			}
		}
		require.Contains(t, got, "ObjectStore pgvector destinationPath", env)
		require.Contains(t, got, "CronJob qdrant-snapshot BACKUP_URI", env)
		for what, uri := range got {
			assert.Contains(t, uri, "llm-backups-"+env+"/", "%s: %s", env, what)
			if other, dup := seen[uri]; dup {
				t.Errorf("%s and %s both back up to %s", other, env, uri)
			}
			seen[uri] = env
			assert.False(t, strings.HasSuffix(uri, "/"), "%s: %s", env, what)
		}
	}
}

// TestUpstreamCRDsValidateBackupKinds shows the ObjectStore CRD of the Barman Cloud plugin and
// CloudNativePG's own CRDs validate the backup objects prod renders, server-side dry-run: an
// ObjectStore retention the plugin cannot parse, a ScheduledBackup method that does not exist and
// a Cluster plugin without a name are refused.
func TestUpstreamCRDsValidateBackupKinds(t *testing.T) {
	testcluster.Need(t)
	assertCRDsRefuse(t, map[string]crdBreak{
		"ObjectStore":     {[]string{"spec", "retentionPolicy"}, "30 days", `spec.retentionPolicy in body should match '^[1-9][0-9]*[dwm]$'`},
		"ScheduledBackup": {[]string{"spec", "method"}, "barman-cloud", `spec.method: Unsupported value: "barman-cloud"`},
		"Cluster":         {[]string{"spec", "plugins"}, []any{map[string]any{"isWALArchiver": true}}, "spec.plugins[0].name: Required value"},
	})
}
