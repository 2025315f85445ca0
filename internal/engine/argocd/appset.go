package argocd

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"dario.cat/mergo"
	"github.com/argoproj/argo-cd/v3/applicationset/utils"
	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	argoutil "github.com/argoproj/argo-cd/v3/util/argo"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Generated is what an ApplicationSet generates, as its controller writes it.
type Generated struct {
	// Applications are the generated Applications: their labels, annotations, finalizers and
	// spec, rendered by Argo CD's own template code.
	Applications []*unstructured.Unstructured
	// Ignores are the exemptions Git's set declares, one entry per generated Application they
	// name: its ignoreApplicationDifferences, and the labels and annotations its preservedFields
	// keep. The controller leaves those fields as they are live.
	Ignores []v1alpha1.ResourceIgnoreDifferences
	// Updates says the controller updates an Application it made (applicationsSync sync or
	// create-update); under create-only and create-delete it never does, and what it wrote at
	// creation stands.
	Updates bool
	// Unsupported says why the Applications could not be generated ("" when they were): a
	// generator that reads what the auditor does not (clusters, Git, SCM providers, plugins), a
	// progressive sync, or a controller that reports an error on the set.
	Unsupported string
}

// Generate renders the Applications of an ApplicationSet as Argo CD's ApplicationSet controller
// does: each list generator's elements are the parameters, rendered into the template (the
// generator's own template merged over the set's) with Argo CD's template code, then normalized
// as the controller writes them. The values come from the set as the cluster holds it (live,
// nil before its first sync: git), which is what the controller reads; a live set that differs
// from Git's is drift of the set itself. The exemptions come from git alone. Other generators
// need the clusters, a repository or an SCM provider; such a set is Unsupported, with the reason.
// namespace is the set's when its manifest names none (its Application's destination).
func Generate(git, live *unstructured.Unstructured, namespace string) (*Generated, error) {
	declared, err := appSet(git)
	if err != nil {
		return nil, err
	}
	set := declared
	if live != nil {
		if set, err = appSet(live); err != nil {
			return nil, err
		}
		for _, c := range set.Status.Conditions {
			if c.Type == v1alpha1.ApplicationSetConditionErrorOccurred && c.Status == v1alpha1.ApplicationSetConditionStatusTrue {
				return &Generated{Unsupported: "its controller reports an error (" + c.Message + ")"}, nil
			}
		}
	}
	switch {
	case set.Spec.TemplatePatch != nil:
		return &Generated{Unsupported: "its templatePatch is not rendered by the auditor"}, nil
	case set.Spec.Strategy != nil && set.Spec.Strategy.Type != "" && set.Spec.Strategy.Type != "AllAtOnce":
		return &Generated{Unsupported: "its " + set.Spec.Strategy.Type + " strategy has the controller turn automated sync on and off, which the auditor does not model"}, nil
	}
	if set.Namespace == "" {
		set.Namespace = namespace
	}
	out := Generated{Updates: true}
	if p := set.Spec.SyncPolicy; p != nil && p.ApplicationsSync != nil {
		out.Updates = *p.ApplicationsSync == v1alpha1.ApplicationsSyncPolicySync || *p.ApplicationsSync == v1alpha1.ApplicationsSyncPolicyCreateUpdate
	}
	r := &utils.Render{}
	for i, g := range set.Spec.Generators {
		if kinds := generatorKinds(g); len(kinds) != 1 || kinds[0] != "list" {
			return &Generated{Unsupported: fmt.Sprintf("generator %d is %s; the auditor renders list generators only", i+1, strings.Join(kinds, "+"))}, nil
		}
		if g.Selector != nil {
			return &Generated{Unsupported: fmt.Sprintf("generator %d has a selector, which the auditor does not apply", i+1)}, nil
		}
		params, err := listParams(g.List, set.Spec.GoTemplate)
		if err != nil {
			return nil, fmt.Errorf("ApplicationSet %s, generator %d: %w", set.Name, i+1, err)
		}
		tmpl := g.List.Template.DeepCopy()
		if err := mergo.Merge(tmpl, set.Spec.Template); err != nil {
			return nil, fmt.Errorf("ApplicationSet %s, generator %d: template: %w", set.Name, i+1, err)
		}
		base := &v1alpha1.Application{Spec: tmpl.Spec}
		base.Name, base.Namespace, base.Labels, base.Annotations, base.Finalizers = tmpl.Name, tmpl.Namespace, tmpl.Labels, tmpl.Annotations, tmpl.Finalizers
		for _, p := range params {
			app, err := r.RenderTemplateParams(base, set.Spec.SyncPolicy, p, set.Spec.GoTemplate, set.Spec.GoTemplateOptions)
			if err != nil {
				return nil, fmt.Errorf("ApplicationSet %s, generator %d: %w", set.Name, i+1, err)
			}
			obj, err := generatedObject(app, set.Namespace)
			if err != nil {
				return nil, fmt.Errorf("ApplicationSet %s: Application %s: %w", set.Name, app.Name, err)
			}
			out.Applications = append(out.Applications, obj)
		}
	}
	out.addIgnores(declared)
	return &out, nil
}

// addIgnores adds to out.Ignores, for each generated Application, the differences the declared
// ApplicationSet has Argo CD ignore: its preserved labels and annotations, and its
// ignoreApplicationDifferences entries that name the Application or every one.
func (out *Generated) addIgnores(declared *v1alpha1.ApplicationSet) {
	var preserved []string
	if p := declared.Spec.PreservedFields; p != nil {
		for _, k := range p.Labels {
			preserved = append(preserved, "/metadata/labels/"+pointerEscape(k))
		}
		for _, k := range p.Annotations {
			preserved = append(preserved, "/metadata/annotations/"+pointerEscape(k))
		}
	}
	for _, app := range out.Applications {
		if len(preserved) > 0 {
			out.Ignores = append(out.Ignores, v1alpha1.ResourceIgnoreDifferences{Group: ApplicationGVK.Group, Kind: ApplicationGVK.Kind,
				Name: app.GetName(), Namespace: app.GetNamespace(), JSONPointers: preserved})
		}
		for _, ig := range declared.Spec.IgnoreApplicationDifferences {
			if ig.Name != "" && ig.Name != app.GetName() {
				continue
			}
			out.Ignores = append(out.Ignores, v1alpha1.ResourceIgnoreDifferences{Group: ApplicationGVK.Group, Kind: ApplicationGVK.Kind,
				Name: app.GetName(), Namespace: app.GetNamespace(), JSONPointers: ig.JSONPointers, JQPathExpressions: ig.JQPathExpressions})
		}
	}
}

// appSet decodes an ApplicationSet.
func appSet(u *unstructured.Unstructured) (*v1alpha1.ApplicationSet, error) {
	var set v1alpha1.ApplicationSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &set); err != nil {
		return nil, fmt.Errorf("ApplicationSet %s: %w", u.GetName(), err)
	}
	return &set, nil
}

// pointerEscape escapes a map key for a JSON pointer (RFC 6901).
func pointerEscape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// generatorKinds names the kinds of generator g sets (list, clusters, git, matrix, ...).
func generatorKinds(g v1alpha1.ApplicationSetGenerator) []string {
	data, err := json.Marshal(g)
	if err != nil {
		return []string{"unreadable"}
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return []string{"unreadable"}
	}
	var kinds []string
	for k := range m {
		if k != "selector" {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	if len(kinds) == 0 {
		return []string{"empty"}
	}
	return kinds
}

// listParams are a list generator's parameter sets: each element, as Argo CD's list generator
// gives them (with goTemplate the element as it is; else its string values, and those under
// "values" as values.<key>), then the elements of elementsYaml.
func listParams(l *v1alpha1.ListGenerator, goTemplate bool) ([]map[string]any, error) {
	var out []map[string]any
	for i, raw := range l.Elements {
		var element map[string]any
		if err := json.Unmarshal(raw.Raw, &element); err != nil {
			return nil, fmt.Errorf("element %d: %w", i+1, err)
		}
		if goTemplate {
			out = append(out, element)
			continue
		}
		params := map[string]any{}
		for k, v := range element {
			if k == "values" {
				values, ok := v.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("element %d: values is not a map", i+1)
				}
				for vk, vv := range values {
					s, ok := vv.(string)
					if !ok {
						return nil, fmt.Errorf("element %d: values.%s is not a string", i+1, vk)
					}
					params["values."+vk] = s
				}
				continue
			}
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("element %d: %s is not a string (without goTemplate every value is one)", i+1, k)
			}
			params[k] = s
		}
		out = append(out, params)
	}
	if l.ElementsYaml != "" {
		var elements []map[string]any
		if err := yaml.Unmarshal([]byte(l.ElementsYaml), &elements); err != nil {
			return nil, fmt.Errorf("elementsYaml: %w", err)
		}
		out = append(out, elements...)
	}
	return out, nil
}

// generatedObject is app as the ApplicationSet controller writes it: in the set's namespace, its
// spec normalized, with its labels, annotations and finalizers. The controller's owner
// reference and the annotations it preserves are its own bookkeeping, not Git's.
func generatedObject(app *v1alpha1.Application, namespace string) (*unstructured.Unstructured, error) {
	if app.Name == "" {
		return nil, errors.New("the template renders no name")
	}
	out := &v1alpha1.Application{Spec: *argoutil.NormalizeApplicationSpec(&app.Spec)}
	out.APIVersion, out.Kind = ApplicationGVK.GroupVersion().String(), ApplicationGVK.Kind
	out.Name, out.Namespace = app.Name, namespace
	out.Labels, out.Annotations, out.Finalizers = app.Labels, app.Annotations, slices.Clone(app.Finalizers)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(out)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}
