package argocd

import (
	"fmt"
	"strings"

	"github.com/argoproj/argo-cd/gitops-engine/v3/pkg/diff"
	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/argo/managedfields"
	"github.com/argoproj/argo-cd/v3/util/argo/normalizers"
	"github.com/argoproj/argo-cd/v3/util/glob"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/yaml"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// ConfigMapName is Argo CD's settings ConfigMap, which holds resource customizations.
const ConfigMapName = "argocd-cm"

// Overrides reads the ignoreDifferences customizations of argocd-cm's data, in both forms Argo CD
// accepts: resource.customizations.ignoreDifferences.<group_kind> (or .all) keys, and the older
// resource.customizations YAML keyed by group/kind.
func Overrides(data map[string]string) (map[string]v1alpha1.ResourceOverride, error) {
	out := map[string]v1alpha1.ResourceOverride{}
	if legacy := data["resource.customizations"]; legacy != "" {
		var raw map[string]struct {
			IgnoreDifferences string `json:"ignoreDifferences"`
		}
		if err := yaml.Unmarshal([]byte(legacy), &raw); err != nil {
			return nil, fmt.Errorf("%s resource.customizations: %w", ConfigMapName, err)
		}
		for key, v := range raw {
			var ign v1alpha1.OverrideIgnoreDiff
			if err := yaml.Unmarshal([]byte(v.IgnoreDifferences), &ign); err != nil {
				return nil, fmt.Errorf("%s resource.customizations %s: %w", ConfigMapName, key, err)
			}
			out[key] = v1alpha1.ResourceOverride{IgnoreDifferences: ign}
		}
	}
	const prefix = "resource.customizations.ignoreDifferences."
	for k, v := range data {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		key := overrideKey(strings.TrimPrefix(k, prefix))
		var ign v1alpha1.OverrideIgnoreDiff
		if err := yaml.Unmarshal([]byte(v), &ign); err != nil {
			return nil, fmt.Errorf("%s %s: %w", ConfigMapName, k, err)
		}
		o := out[key]
		o.IgnoreDifferences.JSONPointers = append(o.IgnoreDifferences.JSONPointers, ign.JSONPointers...)
		o.IgnoreDifferences.JQPathExpressions = append(o.IgnoreDifferences.JQPathExpressions, ign.JQPathExpressions...)
		o.IgnoreDifferences.ManagedFieldsManagers = append(o.IgnoreDifferences.ManagedFieldsManagers, ign.ManagedFieldsManagers...)
		out[key] = o
	}
	return out, nil
}

// overrideKey turns the key suffix (apps_Deployment, Service, all) into group/Kind as Argo CD does.
func overrideKey(s string) string {
	if s == "all" {
		return "*/*"
	}
	if i := strings.LastIndex(s, "_"); i >= 0 {
		return s[:i] + "/" + s[i+1:]
	}
	return s
}

// normalizer applies ignoreDifferences with Argo CD's own code: its ignore normalizer for
// jsonPointers and jqPathExpressions, and its managed-fields normalizer for managedFieldsManagers.
type normalizer struct {
	ignore   diff.Normalizer
	managers []v1alpha1.ResourceIgnoreDifferences
}

// IgnoreNormalizer returns ignore entries alone (no customizations), as the drift engine's
// Normalizer: an ApplicationSet's exemptions for the Applications it generates, which its
// controller applies so.
func IgnoreNormalizer(ignores []v1alpha1.ResourceIgnoreDifferences) (drift.Normalizer, error) {
	return (&App{Name: "(ApplicationSet)", rawIgnores: ignores}).Normalizer(nil)
}

// Normalizer returns the Application's ignoreDifferences, with argocd-cm's customizations, as the
// drift engine's Normalizer.
func (a *App) Normalizer(overrides map[string]v1alpha1.ResourceOverride) (drift.Normalizer, error) {
	ign, err := normalizers.NewIgnoreNormalizer(a.rawIgnores, overrides, normalizers.IgnoreNormalizerOpts{})
	if err != nil {
		return nil, fmt.Errorf("application %s: ignoreDifferences: %w", a.Name, err)
	}
	n := &normalizer{ignore: ign}
	for _, r := range a.rawIgnores {
		if len(r.ManagedFieldsManagers) > 0 {
			n.managers = append(n.managers, r)
		}
	}
	for key, o := range overrides {
		if len(o.IgnoreDifferences.ManagedFieldsManagers) == 0 {
			continue
		}
		group, kind := "", key
		if i := strings.Index(key, "/"); i >= 0 {
			group, kind = key[:i], key[i+1:]
		}
		n.managers = append(n.managers, v1alpha1.ResourceIgnoreDifferences{Group: group, Kind: kind, ManagedFieldsManagers: o.IgnoreDifferences.ManagedFieldsManagers})
	}
	return n, nil
}

// Normalize removes the ignored fields from copies of both objects.
func (n *normalizer) Normalize(desired, live *unstructured.Unstructured, pt *typed.ParseableType) (*unstructured.Unstructured, *unstructured.Unstructured, error) {
	if desired == nil || live == nil {
		return desired, live, nil
	}
	d, l := desired.DeepCopy(), live.DeepCopy()
	if err := n.ignore.Normalize(d); err != nil {
		return nil, nil, fmt.Errorf("ignoreDifferences on %s %s: %w", d.GetKind(), d.GetName(), err)
	}
	if err := n.ignore.Normalize(l); err != nil {
		return nil, nil, fmt.Errorf("ignoreDifferences on %s %s: %w", l.GetKind(), l.GetName(), err)
	}
	var trusted []string
	gk := d.GroupVersionKind().GroupKind()
	for _, r := range n.managers {
		if glob.Match(r.Group, gk.Group) && glob.Match(r.Kind, gk.Kind) &&
			(r.Name == "" || r.Name == d.GetName()) && (r.Namespace == "" || r.Namespace == d.GetNamespace()) {
			trusted = append(trusted, r.ManagedFieldsManagers...)
		}
	}
	if len(trusted) == 0 {
		return d, l, nil
	}
	nl, nd, err := managedfields.Normalize(l, d, trusted, pt)
	if err != nil {
		return nil, nil, fmt.Errorf("managedFieldsManagers on %s %s: %w", d.GetKind(), d.GetName(), err)
	}
	return nd, nl, nil
}
