// Package policy evaluates the platform's ValidatingAdmissionPolicies (policies/) offline, against
// manifests, with the API server's own admission code: the CEL environment and compilers of
// k8s.io/apiserver/pkg/admission/plugin/cel, the validator of
// k8s.io/apiserver/pkg/admission/plugin/policy/validating (matchConditions, variables,
// validations, messageExpressions, failurePolicy) and the matchers of
// k8s.io/apiserver/pkg/admission/plugin/policy/{generic,matching} (resourceRules,
// namespaceSelector, objectSelector, excludeResourceRules). Params are collected with
// generic.CollectParams from the param objects loaded next to the policies.
//
// What differs from a live API server: objects are evaluated as written (no defaulting, no
// mutating admission, no built-in schema validation), as a CREATE by a fixed user, and the
// `authorizer` CEL variable is not bound.
package policy

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/client-go/informers"
)

// Violation is one denied validation (or a configuration error, which the API server also turns
// into a denial under failurePolicy Fail).
type Violation struct {
	Policy  string // ValidatingAdmissionPolicy name
	Binding string // ValidatingAdmissionPolicyBinding name ("" for a policy-level error)
	Message string
	Object  string // "Kind namespace/name" of the evaluated object
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s (policy %s, binding %s)", v.Object, v.Message, v.Policy, v.Binding)
}

// Set is a loaded and compiled set of policies, bindings and param objects.
type Set struct {
	policies []*compiledPolicy
	params   map[schema.GroupVersionKind][]*unstructured.Unstructured
}

type compiledPolicy struct {
	policy    *admissionregistrationv1.ValidatingAdmissionPolicy
	bindings  []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	validator validating.Validator
	// param store for paramKind (nil without paramKind)
	paramInformer informers.GenericInformer
	paramScope    meta.RESTScope
}

// Policies lists the loaded policy names, sorted.
func (s *Set) Policies() []string {
	var names []string
	for _, p := range s.policies {
		names = append(names, p.policy.Name)
	}
	return names
}

// Bindings lists the loaded binding names, sorted by policy then binding.
func (s *Set) Bindings() []string {
	var names []string
	for _, p := range s.policies {
		for _, b := range p.bindings {
			names = append(names, b.Name)
		}
	}
	return names
}

// ObjectID is how violations name an object: "Kind namespace/name" (or "Kind name").
func ObjectID(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + " " + o.GetName()
	}
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// MetadataNameLabel is the label the API server sets on every namespace to its name.
const MetadataNameLabel = "kubernetes.io/metadata.name"
