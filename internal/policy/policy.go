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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/informers"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
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

// LoadDir is Load over a directory on disk.
func LoadDir(dir string) (*Set, error) {
	return Load(os.DirFS(dir))
}

// Load reads every *.yaml / *.yml file of fsys (recursively, kustomization files excepted) and
// builds a Set from the ValidatingAdmissionPolicies, ValidatingAdmissionPolicyBindings and any
// other object (a potential param, e.g. a ConfigMap) found.
func Load(fsys fs.FS) (*Set, error) {
	var objs []*unstructured.Unstructured
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		base := path.Base(p)
		ext := path.Ext(base)
		if (ext != ".yaml" && ext != ".yml") || strings.HasPrefix(base, "kustomization.") || base == "Kustomization" {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		docs, err := DecodeObjects(data)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		objs = append(objs, docs...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load policies: %w", err)
	}
	return New(objs)
}

// DecodeObjects decodes a multi-document YAML (or JSON) stream into objects; empty documents are
// skipped.
func DecodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("document without apiVersion/kind (name %q)", u.GetName())
		}
		out = append(out, u)
	}
}

const admissionGroup = "admissionregistration.k8s.io"

// New builds a Set from already decoded objects (e.g. the kustomize-rendered policies/).
// Objects other than policies, bindings and Kustomizations are kept as params.
func New(objs []*unstructured.Unstructured) (*Set, error) {
	policies := map[string]*compiledPolicy{}
	var bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	params := map[schema.GroupVersionKind][]*unstructured.Unstructured{}
	var errs []error
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		switch {
		case gvk.Group == admissionGroup && gvk.Kind == "ValidatingAdmissionPolicy":
			if gvk.Version != "v1" {
				errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicy %s: only %s/v1 is supported, got %s", o.GetName(), admissionGroup, gvk.Version))
				continue
			}
			p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, p, true); err != nil {
				errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicy %s: %w", o.GetName(), err))
				continue
			}
			if _, dup := policies[p.Name]; dup {
				errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicy %s defined twice", p.Name))
				continue
			}
			policies[p.Name] = &compiledPolicy{policy: p}
		case gvk.Group == admissionGroup && gvk.Kind == "ValidatingAdmissionPolicyBinding":
			if gvk.Version != "v1" {
				errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicyBinding %s: only %s/v1 is supported, got %s", o.GetName(), admissionGroup, gvk.Version))
				continue
			}
			b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, b, true); err != nil {
				errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicyBinding %s: %w", o.GetName(), err))
				continue
			}
			bindings = append(bindings, b)
		case gvk.Group == "kustomize.config.k8s.io":
			// not an API object
		default:
			params[gvk] = append(params[gvk], o)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	for _, b := range bindings {
		p, ok := policies[b.Spec.PolicyName]
		if !ok {
			errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicyBinding %s: policy %q not found", b.Name, b.Spec.PolicyName))
			continue
		}
		if len(b.Spec.ValidationActions) == 0 {
			errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicyBinding %s: validationActions is required", b.Name))
			continue
		}
		defaultBinding(b)
		p.bindings = append(p.bindings, b)
	}

	s := &Set{params: params}
	names := make([]string, 0, len(policies))
	for n := range policies {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := policies[n]
		defaultPolicy(p.policy)
		if err := checkPolicy(p.policy); err != nil {
			errs = append(errs, err)
			continue
		}
		p.validator = compilePolicy(p.policy)
		if err := p.validator.CompileError(); err != nil {
			errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicy %s: %w", n, err))
			continue
		}
		sort.Slice(p.bindings, func(i, j int) bool { return p.bindings[i].Name < p.bindings[j].Name })
		if pk := p.policy.Spec.ParamKind; pk != nil {
			p.paramInformer, p.paramScope = s.paramStore(pk, p.bindings)
		}
		s.policies = append(s.policies, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// defaultPolicy applies the API server's defaults (SetDefaults_ValidatingAdmissionPolicySpec,
// SetDefaults_MatchResources, SetDefaults_Rule) that the matchers rely on.
func defaultPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
	if p.Spec.FailurePolicy == nil {
		f := admissionregistrationv1.Fail
		p.Spec.FailurePolicy = &f
	}
	if p.Spec.MatchConstraints != nil {
		defaultMatchResources(p.Spec.MatchConstraints)
	}
}

func defaultBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	if b.Spec.MatchResources != nil {
		defaultMatchResources(b.Spec.MatchResources)
	}
}

func defaultMatchResources(m *admissionregistrationv1.MatchResources) {
	if m.MatchPolicy == nil {
		mp := admissionregistrationv1.Equivalent
		m.MatchPolicy = &mp
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				s := admissionregistrationv1.AllScopes
				rules[i].Scope = &s
			}
		}
	}
}

// envTemplate is the environment the ValidatingAdmissionPolicy plugin and the API validation of
// policies use: the base CEL environment at the default compatibility version.
func envTemplate() *environment.EnvSet {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
}

// checkPolicy compiles every expression as the API server does when the policy is created
// (k8s.io/kubernetes/pkg/apis/admissionregistration/validation: environment.NewExpressions,
// variables composed in order, matchConditions without variables), and reports each failure
// with the policy name, the field and the expression.
func checkPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) error {
	if p.Spec.MatchConstraints == nil || len(p.Spec.MatchConstraints.ResourceRules) == 0 {
		return fmt.Errorf("ValidatingAdmissionPolicy %s: spec.matchConstraints.resourceRules is required", p.Name)
	}
	hasParams := p.Spec.ParamKind != nil
	compiler, err := plugincel.NewCompositedCompiler(envTemplate())
	if err != nil {
		return fmt.Errorf("ValidatingAdmissionPolicy %s: CEL environment: %w", p.Name, err)
	}
	var errs []error
	bad := func(field, expr string, cerr error) {
		errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicy %s: %s: invalid CEL expression %q: %v", p.Name, field, strings.TrimSpace(expr), cerr))
	}
	withAuthz := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	for i, v := range p.Spec.Variables {
		if v.Name == "" || strings.TrimSpace(v.Expression) == "" {
			errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicy %s: spec.variables[%d]: name and expression are required", p.Name, i))
			continue
		}
		r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, withAuthz, environment.NewExpressions)
		if r.Error != nil {
			bad(fmt.Sprintf("spec.variables[%d] (%s)", i, v.Name), v.Expression, r.Error)
		}
	}
	stateless := plugincel.NewCompiler(envTemplate())
	for i, mc := range p.Spec.MatchConditions {
		r := stateless.CompileCELExpression((*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i]), withAuthz, environment.NewExpressions)
		if r.Error != nil {
			bad(fmt.Sprintf("spec.matchConditions[%d] (%s)", i, mc.Name), mc.Expression, r.Error)
		}
	}
	if len(p.Spec.Validations) == 0 && len(p.Spec.AuditAnnotations) == 0 {
		errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicy %s: spec.validations or spec.auditAnnotations is required", p.Name))
	}
	for i, v := range p.Spec.Validations {
		if strings.TrimSpace(v.Expression) == "" {
			errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicy %s: spec.validations[%d].expression is required", p.Name, i))
			continue
		}
		r := compiler.CompileCELExpression(&validating.ValidationCondition{Expression: v.Expression}, withAuthz, environment.NewExpressions)
		if r.Error != nil {
			bad(fmt.Sprintf("spec.validations[%d].expression", i), v.Expression, r.Error)
		}
		if strings.TrimSpace(v.MessageExpression) != "" {
			r := compiler.CompileCELExpression(&validating.MessageExpressionCondition{MessageExpression: v.MessageExpression},
				plugincel.OptionalVariableDeclarations{HasParams: hasParams}, environment.NewExpressions)
			if r.Error != nil {
				bad(fmt.Sprintf("spec.validations[%d].messageExpression", i), v.MessageExpression, r.Error)
			}
		}
		if strings.ContainsAny(strings.TrimSpace(v.Message), "\n") {
			errs = append(errs, fmt.Errorf("ValidatingAdmissionPolicy %s: spec.validations[%d].message must not contain line breaks", p.Name, i))
		}
	}
	for i, a := range p.Spec.AuditAnnotations {
		r := compiler.CompileCELExpression(&validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}, withAuthz, environment.NewExpressions)
		if r.Error != nil {
			bad(fmt.Sprintf("spec.auditAnnotations[%d].valueExpression", i), a.ValueExpression, r.Error)
		}
	}
	return errors.Join(errs...)
}

// compilePolicy mirrors compilePolicy of k8s.io/apiserver/pkg/admission/plugin/policy/validating
// (unexported there): a CompositedCompiler over the base environment, variables compiled and
// stored in order, matchConditions, validations, audit annotations and message expressions, in
// environment.StoredExpressions mode, wrapped in validating.NewValidator.
func compilePolicy(policy *admissionregistrationv1.ValidatingAdmissionPolicy) validating.Validator {
	hasParam := policy.Spec.ParamKind != nil
	optionalVars := plugincel.OptionalVariableDeclarations{HasParams: hasParam, HasAuthorizer: true}
	expressionOptionalVars := plugincel.OptionalVariableDeclarations{HasParams: hasParam, HasAuthorizer: false}
	failurePolicy := policy.Spec.FailurePolicy
	filterCompiler, err := plugincel.NewCompositedCompiler(envTemplate())
	if err != nil {
		return validating.NewValidator(nil, nil, nil, nil, failurePolicy, err)
	}
	variables := make([]plugincel.NamedExpressionAccessor, len(policy.Spec.Variables))
	for i, v := range policy.Spec.Variables {
		variables[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	filterCompiler.CompileAndStoreVariables(variables, optionalVars, environment.StoredExpressions)

	var matcher matchconditions.Matcher
	if mcs := policy.Spec.MatchConditions; len(mcs) > 0 {
		accessors := make([]plugincel.ExpressionAccessor, len(mcs))
		for i := range mcs {
			accessors[i] = (*matchconditions.MatchCondition)(&mcs[i])
		}
		matcher = matchconditions.NewMatcher(filterCompiler.CompileCondition(accessors, optionalVars, environment.StoredExpressions), failurePolicy, "policy", "validate", policy.Name)
	}
	validations := make([]plugincel.ExpressionAccessor, len(policy.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(policy.Spec.Validations))
	for i, v := range policy.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	audits := make([]plugincel.ExpressionAccessor, len(policy.Spec.AuditAnnotations))
	for i, a := range policy.Spec.AuditAnnotations {
		audits[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	return validating.NewValidator(
		filterCompiler.CompileCondition(validations, optionalVars, environment.StoredExpressions),
		matcher,
		filterCompiler.CompileCondition(audits, optionalVars, environment.StoredExpressions),
		filterCompiler.CompileCondition(messages, expressionOptionalVars, environment.StoredExpressions),
		failurePolicy,
		nil,
	)
}

// clusterScopedKinds are the kinds Evaluate treats as cluster-scoped (no namespace); any other
// kind without metadata.namespace is evaluated in namespace "default", as kubectl would create it.
var clusterScopedKinds = map[string]bool{
	"Namespace": true, "Node": true, "PersistentVolume": true, "PriorityClass": true,
	"StorageClass": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"CustomResourceDefinition": true, "ValidatingAdmissionPolicy": true,
	"ValidatingAdmissionPolicyBinding": true, "MutatingWebhookConfiguration": true,
	"ValidatingWebhookConfiguration": true, "APIService": true, "RuntimeClass": true,
	"IngressClass": true, "GatewayClass": true, "NodePool": true, "EC2NodeClass": true,
	"ClusterIssuer": true, "ClusterSecretStore": true,
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

// Evaluate runs every binding of every policy against obj as a CREATE request, the object's
// namespace carrying namespaceLabels (plus kubernetes.io/metadata.name=<namespace>, which the
// API server always sets), and returns the violations: denied validations of bindings with the
// Deny action, and evaluation/configuration errors under failurePolicy Fail. Warn and Audit
// actions produce no violation.
func (s *Set) Evaluate(obj *unstructured.Unstructured, namespaceLabels map[string]string) []Violation {
	id := ObjectID(obj)
	gvk := obj.GroupVersionKind()
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	ns := obj.GetNamespace()
	if ns == "" && !clusterScopedKinds[gvk.Kind] {
		ns = metav1.NamespaceDefault
	}
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
			for _, param := range params {
				res := cp.validator.Validate(ctx, matchResource, versionedAttr, param, namespace, celconfig.RuntimeCELCostBudget, nil)
				for _, d := range res.Decisions {
					if d.Action != validating.ActionDeny {
						continue
					}
					for _, a := range b.Spec.ValidationActions {
						if a == admissionregistrationv1.Deny {
							deny(p, b, d.Message)
						}
					}
				}
				for _, a := range res.AuditAnnotations {
					if a.Action == validating.AuditAnnotationActionError {
						deny(p, b, a.Error)
					}
				}
			}
		}
	}
	return out
}

// paramStore builds an informer-like store over the loaded objects of the param kind, for
// generic.CollectParams. The kind is namespaced if a loaded param or a paramRef has a namespace.
func (s *Set) paramStore(pk *admissionregistrationv1.ParamKind, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) (informers.GenericInformer, meta.RESTScope) {
	gv, _ := schema.ParseGroupVersion(pk.APIVersion)
	gvk := gv.WithKind(pk.Kind)
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	namespaced := false
	for _, o := range s.params[gvk] {
		_ = indexer.Add(o)
		if o.GetNamespace() != "" {
			namespaced = true
		}
	}
	for _, b := range bindings {
		if b.Spec.ParamRef != nil && b.Spec.ParamRef.Namespace != "" {
			namespaced = true
		}
	}
	scope := meta.RESTScopeRoot
	if namespaced {
		scope = meta.RESTScopeNamespace
	}
	return &staticInformer{lister: cache.NewGenericLister(indexer, gvr.GroupResource())}, scope
}

// staticInformer is a synced, never-changing informers.GenericInformer over a fixed store.
type staticInformer struct {
	lister cache.GenericLister
}

func (i *staticInformer) Informer() cache.SharedIndexInformer { return syncedInformer{} }
func (i *staticInformer) Lister() cache.GenericLister         { return i.lister }

// syncedInformer only answers HasSynced, the one method CollectParams calls.
type syncedInformer struct {
	cache.SharedIndexInformer
}

func (syncedInformer) HasSynced() bool { return true }
