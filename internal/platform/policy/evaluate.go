package policy

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Evaluate runs every binding of every policy against obj as a CREATE request, the object's
// namespace carrying namespaceLabels (plus kubernetes.io/metadata.name=<namespace>, which the
// API server always sets), and returns the violations: denied validations of bindings with the
// Deny action, and evaluation/configuration errors under failurePolicy Fail. Warn and Audit
// actions produce no violation.
func (s *Set) Evaluate(obj *unstructured.Unstructured, namespaceLabels map[string]string) []Violation {
	id := ObjectID(obj)
	gvk := obj.GroupVersionKind()
	// A namespaced object without metadata.namespace is evaluated in namespace "default", as
	// kubectl would create it.
	gvr, namespaced := resourceOf(RESTMapper(), gvk)
	ns := obj.GetNamespace()
	if ns == "" && namespaced {
		ns = metav1.NamespaceDefault
	}
	namespace, indexer := namespaceIndexer(ns, namespaceLabels)
	// The namespace is always in the lister, so the matcher never falls back to its (nil) client.
	policyMatcher := generic.NewPolicyMatcher(matching.NewMatcher(listersv1.NewNamespaceLister(indexer), nil))

	attr := admission.NewAttributesRecord(obj, nil, gvk, ns, obj.GetName(), gvr, "", admission.Create,
		&metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "llm-policy-offline"})
	o := admission.NewObjectInterfacesFromScheme(runtime.NewScheme())
	ctx := context.Background()

	var out []Violation
	deny := func(p *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, msg string) {
		v := Violation{Policy: p.Name, Message: msg, Object: id}
		if b != nil {
			v.Binding = b.Name
		}
		out = append(out, v)
	}
	configError := func(p *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, err error) {
		if *p.Spec.FailurePolicy == admissionregistrationv1.Ignore {
			return
		}
		if b == nil {
			deny(p, nil, fmt.Sprintf("failed to configure policy: %v", err))
		} else {
			deny(p, b, fmt.Sprintf("failed to configure binding: %v", err))
		}
	}

	for _, cp := range s.policies {
		p := cp.policy
		matches, matchResource, matchKind, err := policyMatcher.DefinitionMatches(attr, o, validating.NewValidatingAdmissionPolicyAccessor(p))
		if err != nil {
			configError(p, nil, err)
			continue
		}
		if !matches {
			continue
		}
		for _, b := range cp.bindings {
			ok, err := policyMatcher.BindingMatches(attr, o, validating.NewValidatingAdmissionPolicyBindingAccessor(b))
			if err != nil {
				configError(p, b, err)
				continue
			}
			if !ok {
				continue
			}
			params, err := generic.CollectParams(p.Spec.ParamKind, cp.paramInformer, cp.paramScope, b.Spec.ParamRef, ns, nil, nil)
			if err != nil {
				configError(p, b, err)
				continue
			}
			// Same kind as requested: no conversion (the matched kind is the object's own kind
			// for exact rule matches, the only ones without an equivalent-resource mapping).
			versionedAttr := &admission.VersionedAttributes{Attributes: attr, VersionedKind: matchKind, VersionedObject: admission.NewLazyObject(obj)}
			if matchKind != gvk {
				configError(p, b, fmt.Errorf("object %s would need conversion to %s, not supported offline", gvk, matchKind))
				continue
			}
			validateParams(ctx, cp, matchResource, versionedAttr, params, namespace, b.Spec.ValidationActions, func(msg string) { deny(p, b, msg) })
		}
	}
	return out
}

// namespaceIndexer is the namespace ns, with namespaceLabels and its name label, and an
// indexer holding it; none and an empty indexer when ns is "".
func namespaceIndexer(ns string, namespaceLabels map[string]string) (*corev1.Namespace, cache.Indexer) {
	var namespace *corev1.Namespace
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if ns != "" {
		lbls := map[string]string{}
		for k, v := range namespaceLabels {
			lbls[k] = v
		}
		lbls[MetadataNameLabel] = ns
		namespace = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: lbls}}
		_ = indexer.Add(namespace)
	}
	return namespace, indexer
}

// validateParams validates the object of versionedAttr against cp with each of params, calling
// deny with each message of a decision to deny (when actions hold Deny) and of each audit
// annotation in error.
func validateParams(ctx context.Context, cp *compiledPolicy, matchResource schema.GroupVersionResource, versionedAttr *admission.VersionedAttributes,
	params []runtime.Object, namespace *corev1.Namespace, actions []admissionregistrationv1.ValidationAction, deny func(string)) {
	for _, param := range params {
		res := cp.validator.Validate(ctx, matchResource, versionedAttr, param, namespace, celconfig.RuntimeCELCostBudget, nil)
		for _, d := range res.Decisions {
			if d.Action != validating.ActionDeny {
				continue
			}
			for _, a := range actions {
				if a == admissionregistrationv1.Deny {
					deny(d.Message)
				}
			}
		}
		for _, a := range res.AuditAnnotations {
			if a.Action == validating.AuditAnnotationActionError {
				deny(a.Error)
			}
		}
	}
}
