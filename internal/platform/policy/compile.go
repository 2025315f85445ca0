package policy

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
)

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

	errs = append(errs, bindPolicies(policies, bindings)...)

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

// bindPolicies defaults each binding and adds it to the policy it names, returning an error for
// each binding whose policy is not in policies or that has no validation actions.
func bindPolicies(policies map[string]*compiledPolicy, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) []error {
	var errs []error
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
	return errs
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
