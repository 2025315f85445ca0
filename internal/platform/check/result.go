package check

import (
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/platform/gpustack"
)

// Result is the outcome of a check, per env (prod first).
type Result struct {
	Base string `json:"base"`
	// Head is the commit checked; empty when WorkTree is set.
	Head string `json:"head"`
	// WorkTree is the directory whose work tree was checked (uncommitted changes included).
	WorkTree string      `json:"workTree,omitempty"`
	Envs     []EnvResult `json:"envs"`
	// Fork is the merge base of Base and Head when it is not Base: what was broken there and at
	// Base already is inherited rather than introduced.
	Fork string `json:"fork,omitempty"`
	// Paths are the files the change touches, from the fork point to the head: a finding whose
	// object is one of them (a file-level finding) is on what the change touches.
	Paths []string `json:"paths,omitempty"`
	// Errors name the envs that could not be checked, and why (EnvResult.Error).
	Errors []string `json:"errors,omitempty"`
	// Passed is false when any env has a violation, at what it runs or at its next promotion,
	// that the change introduced.
	Passed bool `json:"passed"`
}

// EnvResult is one env's rendered diff and findings.
type EnvResult struct {
	Env string `json:"env"`
	// Error says why the env could not be checked (the rest of its result is then empty).
	Error string `json:"error,omitempty"`
	// Skipped says why the env is not checked and that this is no failure: its Applications are
	// picked from the cluster, which check does not read.
	Skipped string `json:"skipped,omitempty"`
	// Revision is the commit the env was rendered at: its pin (apps/<env>/release.yaml) when it
	// is pinned, else the head.
	Revision string   `json:"revision,omitempty"`
	Changes  []Change `json:"changes"`
	// Violations are the rules the env breaks that it did not break at the fork point: the
	// change introduced them, and it fails.
	Violations []Violation `json:"violations"`
	// Inherited are the rules it broke at the fork point already: reported, not failing.
	Inherited []Violation `json:"inherited,omitempty"`
	// Forced are the violations the promotion that moved the pin was forced past, by a reason
	// (ForcedReason) and naming their rules: reported, not failing.
	Forced       []Violation `json:"forced,omitempty"`
	ForcedReason string      `json:"forcedReason,omitempty"`
	// ForkError says why the env could not be judged at the fork point (nothing is inherited).
	ForkError string      `json:"forkError,omitempty"`
	Warnings  []Violation `json:"warnings,omitempty"`
	// Silenced are the findings of rules the repository's layout (.auditor.yaml) turns off in
	// the env, each with the layout's reason: reported, not failing.
	Silenced []Silenced `json:"silenced,omitempty"`
	// Security is what each namespace the env renders enforces (Pod Security, NetworkPolicy).
	Security []NamespaceSecurity `json:"security,omitempty"`
	// GPUPools is what each GPU NodePool gives its nodes (node class, root, AMI) and its budgets.
	GPUPools []GPUPool `json:"gpuPools,omitempty"`
	// GPUStack is the env's GPU stack triple: AMI and driver, image digest and CUDA, GPU Operator
	// (nil without GPUs or without clusters/gpu-stack.yaml at the env's revision).
	GPUStack *gpustack.Triple `json:"gpuStack,omitempty"`
	// Apps lists what changes in what the env's app-of-apps syncs from main (apps/<env>: its
	// Applications, their pins and patches, projects, the GPU stack): it reaches the env unpinned.
	Apps []Change `json:"apps,omitempty"`
	// AppsPath is the path the env's root syncs (apps/<env> in this platform's layout).
	AppsPath string `json:"appsPath,omitempty"`
	// Applications are the env's other Applications (apps/<env> besides its own), rendered from
	// Git as Argo CD renders them; the rules run on their objects too.
	Applications []AppRender `json:"applications,omitempty"`
	// KVCache is how much of each vLLM Deployment's KV cache its --max-num-seqs can use at the
	// Deployment's traffic profile (WriteKVCache prints it).
	KVCache []KVCacheUse `json:"kvCache,omitempty"`
	// Next is, for a pinned env, what it would run if the head were promoted to it.
	Next *NextPromotion `json:"nextPromotion,omitempty"`
}

// Change is an object added, removed or changed between base and head.
type Change struct {
	Kind      string              `json:"kind"`
	Namespace string              `json:"namespace,omitempty"`
	Name      string              `json:"name"`
	Change    string              `json:"change"`
	Fields    []drift.FieldChange `json:"fields,omitempty"`
}

// Violation is a broken rule: an admission policy, or a capacity invariant.
type Violation struct {
	Rule    string `json:"rule"`
	Object  string `json:"object"`
	Message string `json:"message"`
	// Risk, on a warning, says why it matters though the change leaves its object alone (an
	// Application whose objects go unchecked, example names a production env would deploy):
	// such a warning is listed with those on what the change touches, never only counted.
	Risk string `json:"risk,omitempty"`
}

// AddPlacement adds a placement simulation of env's overlay at the head (see internal/platform/simulate)
// to env's result: to its next promotion when it is pinned.
func (r *Result) AddPlacement(env string, violations []Violation) {
	for i := range r.Envs {
		if r.Envs[i].Env == env {
			if n := r.Envs[i].Next; n != nil {
				n.Violations = append(n.Violations, violations...)
			} else {
				r.Envs[i].Violations = append(r.Envs[i].Violations, violations...)
			}
			if len(violations) > 0 {
				r.Passed = false
			}
		}
	}
}
