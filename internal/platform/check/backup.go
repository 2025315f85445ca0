package check

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// barmanCloudPlugin is the name CloudNativePG knows the Barman Cloud plugin by.
const barmanCloudPlugin = "barman-cloud.cloudnative-pg.io"

var (
	cnpgCluster         = schema.GroupKind{Group: "postgresql.cnpg.io", Kind: "Cluster"}
	cnpgScheduledBackup = schema.GroupKind{Group: "postgresql.cnpg.io", Kind: "ScheduledBackup"}
	barmanObjectStore   = schema.GroupKind{Group: "barmancloud.cnpg.io", Kind: "ObjectStore"}
)

// backupOffsite checks that every CloudNativePG Cluster ships its WAL and base backups off the
// cluster through the Barman Cloud plugin (rule backup-offsite):
//   - the in-tree spec.backup.barmanObjectStore is deprecated since CloudNativePG 1.26 and goes
//     away in a later release, with the backups it configures;
//   - without a plugin marked isWALArchiver there is no WAL archive: no point-in-time recovery,
//     and nothing of the database outside its own volumes;
//   - the Barman Cloud plugin's barmanObjectName must name an ObjectStore the env renders in the
//     Cluster's namespace, and that ObjectStore needs a retentionPolicy (else the bucket only grows);
//   - a ScheduledBackup must use method plugin with the Barman Cloud plugin (its method defaults
//     to the in-tree barmanObjectStore).
//
// Each violation names the objects.
func backupOffsite(objs []*unstructured.Unstructured) []Violation {
	stores := map[string]*unstructured.Unstructured{} // namespace/name
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() == barmanObjectStore {
			stores[o.GetNamespace()+"/"+o.GetName()] = o
		}
	}
	var out []Violation
	add := func(o *unstructured.Unstructured, format string, args ...any) {
		out = append(out, Violation{Rule: "backup-offsite", Object: id(o), Message: id(o) + " " + fmt.Sprintf(format, args...)})
	}
	for _, o := range objs {
		switch o.GroupVersionKind().GroupKind() {
		case cnpgCluster:
			if _, found, _ := unstructured.NestedMap(o.Object, "spec", "backup", "barmanObjectStore"); found {
				add(o, "uses the in-tree spec.backup.barmanObjectStore, deprecated since CloudNativePG 1.26: move it to an ObjectStore (barmancloud.cnpg.io/v1) and list plugin %s with isWALArchiver: true in spec.plugins", barmanCloudPlugin)
			}
			archiver, store := walArchiver(o)
			switch {
			case archiver == "":
				add(o, "has no WAL archiver (no plugin in spec.plugins with isWALArchiver: true): no point-in-time recovery, and no copy of the database off its own volumes")
			case archiver == barmanCloudPlugin && store == "":
				add(o, "archives WAL with %s but names no ObjectStore (parameters.barmanObjectName)", barmanCloudPlugin)
			case archiver == barmanCloudPlugin:
				s, ok := stores[o.GetNamespace()+"/"+store]
				if !ok {
					add(o, "archives WAL to ObjectStore %s/%s, which the env does not render", o.GetNamespace(), store)
					break
				}
				if r, _, _ := unstructured.NestedString(s.Object, "spec", "retentionPolicy"); r == "" {
					add(o, "archives WAL to %s, which has no spec.retentionPolicy: base backups and WAL are never deleted", id(s))
				}
			}
		case cnpgScheduledBackup:
			method, _, _ := unstructured.NestedString(o.Object, "spec", "method")
			plugin, _, _ := unstructured.NestedString(o.Object, "spec", "pluginConfiguration", "name")
			if method != "plugin" || plugin != barmanCloudPlugin {
				if method == "" {
					method = "barmanObjectStore (the default)"
				}
				add(o, "backs up with method %s: use method plugin with pluginConfiguration.name %s", method, barmanCloudPlugin)
			}
		}
	}
	return out
}

// walArchiver returns the enabled plugin of a Cluster marked isWALArchiver and, for the Barman
// Cloud plugin, the ObjectStore it names ("" when none).
func walArchiver(cluster *unstructured.Unstructured) (plugin, store string) {
	plugins, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "plugins")
	for _, p := range plugins {
		pm := asMap(p)
		if on, found, _ := unstructured.NestedBool(pm, "enabled"); found && !on {
			continue
		}
		if archiver, _, _ := unstructured.NestedBool(pm, "isWALArchiver"); !archiver {
			continue
		}
		name, _, _ := unstructured.NestedString(pm, "name")
		store, _, _ := unstructured.NestedString(pm, "parameters", "barmanObjectName")
		return name, store
	}
	return "", ""
}

// barmanStoreRefs lists the ObjectStores a CloudNativePG Cluster names for the Barman Cloud
// plugin: the one it archives to (spec.plugins) and those it recovers or replicates from
// (spec.externalClusters). The Cluster cannot archive, nor bootstrap from a backup, without them.
func barmanStoreRefs(cluster *unstructured.Unstructured) []objRef {
	var out []objRef
	add := func(plugin map[string]any, via string) {
		if name, _, _ := unstructured.NestedString(plugin, "name"); name != barmanCloudPlugin {
			return
		}
		if store, _, _ := unstructured.NestedString(plugin, "parameters", "barmanObjectName"); store != "" {
			out = append(out, objRef{gk: barmanObjectStore, namespace: cluster.GetNamespace(), name: store, via: via})
		}
	}
	plugins, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "plugins")
	for _, p := range plugins {
		add(asMap(p), "its spec.plugins")
	}
	ext, _, _ := unstructured.NestedSlice(cluster.Object, "spec", "externalClusters")
	for _, e := range ext {
		plugin, _, _ := unstructured.NestedMap(asMap(e), "plugin")
		add(plugin, "its spec.externalClusters")
	}
	return out
}
