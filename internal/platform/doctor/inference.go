package doctor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// inferenceControllers are the controllerNames of the Gateway implementations that route to an
// InferencePool (inference.networking.k8s.io/v1) through its endpoint picker, as the Gateway API
// Inference Extension's list of implementations names them. A GatewayClass of another controller
// accepts the route and answers every request to a pool with an error.
var inferenceControllers = map[string]string{
	"istio.io/gateway-controller":                   "Istio (with ENABLE_GATEWAY_API_INFERENCE_EXTENSION=true)",
	"gateway.envoyproxy.io/gatewayclass-controller": "Envoy Gateway (with extensionApis.enableBackend)",
	"kgateway.dev/kgateway":                         "kgateway (with the inference extension enabled)",
	"agentgateway.dev/agentgateway":                 "agentgateway",
	"gateway.nginx.org/nginx-gateway-controller":    "NGINX Gateway Fabric (with nginxGateway.gwAPIInferenceExtension.enable)",
	"networking.gke.io/gateway":                     "GKE's Gateway controller",
}

var gatewayClassGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}

// inferenceChecks: where the render has InferencePools, each GatewayClass its Gateways name is
// run by a controller that routes to pools. A missing class is objectChecks' to report.
func inferenceChecks(ctx context.Context, dyn dynamic.Interface, objs []*unstructured.Unstructured, served map[schema.GroupVersion]map[string]resource) []Check {
	pools := false
	classes := map[string][]string{} // GatewayClass → the Gateways naming it
	for _, o := range objs {
		switch o.GroupVersionKind().GroupKind() {
		case schema.GroupKind{Group: "inference.networking.k8s.io", Kind: "InferencePool"}:
			pools = true
		case schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "Gateway"}:
			if n, _, _ := unstructured.NestedString(o.Object, "spec", "gatewayClassName"); n != "" {
				classes[n] = append(classes[n], "Gateway "+o.GetNamespace()+"/"+o.GetName())
			}
		}
	}
	if !pools {
		return nil
	}
	if _, ok := served[gatewayClassGVR.GroupVersion()]["GatewayClass"]; !ok {
		return nil // apiChecks names the Gateway API missing
	}
	var out []Check
	for _, name := range slices.Sorted(maps.Keys(classes)) {
		c := Check{Area: "object", Name: "GatewayClass " + name + " routes to InferencePools"}
		gc, err := dyn.Resource(gatewayClassGVR).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			c.OK, c.Skipped = true, true
			c.Detail = "the GatewayClass is missing (see its own check)"
		case err != nil:
			c.Error = true
			c.Detail = "cannot read it: " + err.Error()
		default:
			ctrl, _, _ := unstructured.NestedString(gc.Object, "spec", "controllerName")
			if who, ok := inferenceControllers[ctrl]; ok {
				c.OK = true
				c.Detail = fmt.Sprintf("controller %s: %s", ctrl, who)
			} else {
				c.Detail = fmt.Sprintf("controller %s is not one that routes to an InferencePool's endpoint picker; named by %s", ctrl, strings.Join(classes[name], ", "))
				c.Fix = "use a GatewayClass of an implementation with the inference extension (docs/platform.md, \"The request path\")"
			}
		}
		out = append(out, c)
	}
	return out
}

var inferencePoolGVR = schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}

// poolStatusChecks: each InferencePool the render has and the cluster holds is Accepted, with its
// references resolved, by every Gateway that reports on it (status.parents, written by the
// Gateway's controller). A pool no Gateway reports on takes no traffic yet. A pool the cluster
// does not hold is not checked: Argo CD has not synced it.
func poolStatusChecks(ctx context.Context, dyn dynamic.Interface, objs []*unstructured.Unstructured, served map[schema.GroupVersion]map[string]resource) []Check {
	if _, ok := served[inferencePoolGVR.GroupVersion()]["InferencePool"]; !ok {
		return nil // apiChecks names the API missing
	}
	var out []Check
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() != (schema.GroupKind{Group: inferencePoolGVR.Group, Kind: "InferencePool"}) {
			continue
		}
		c := Check{Area: "object", Name: "InferencePool " + o.GetNamespace() + "/" + o.GetName() + " accepted"}
		pool, err := dyn.Resource(inferencePoolGVR).Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			c.Error = true
			c.Detail = "cannot read it: " + err.Error()
		default:
			c.OK, c.Detail = poolAccepted(pool)
			if !c.OK {
				c.Fix = "read the Gateway controller's status message; check the GatewayClass supports pools and the pool's picker Service and target port (docs/platform.md, \"The request path\")"
			}
		}
		out = append(out, c)
	}
	return out
}

// poolAccepted reads a pool's status.parents: every parent's Accepted and ResolvedRefs are True,
// and there is at least one parent.
func poolAccepted(pool *unstructured.Unstructured) (bool, string) {
	parents, _, _ := unstructured.NestedSlice(pool.Object, "status", "parents")
	if len(parents) == 0 {
		return false, "no Gateway reports on it (status.parents is empty): no accepted route sends to it, or the Gateway's controller does not know pools"
	}
	ok := true
	var said []string
	for _, p := range parents {
		m, _ := p.(map[string]any)
		ns, _, _ := unstructured.NestedString(m, "parentRef", "namespace")
		if ns == "" {
			ns = pool.GetNamespace()
		}
		kind, _, _ := unstructured.NestedString(m, "parentRef", "kind")
		if kind == "" {
			kind = "Gateway"
		}
		name, _, _ := unstructured.NestedString(m, "parentRef", "name")
		parent := fmt.Sprintf("%s %s/%s", kind, ns, name)
		conds, _, _ := unstructured.NestedSlice(m, "conditions")
		status := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": conds}}}
		var wrong []string
		for _, t := range []string{"Accepted", "ResolvedRefs"} {
			if good, why := conditionTrue(status, t); !good {
				wrong = append(wrong, fmt.Sprintf("not %s (%s)", t, why))
			}
		}
		if len(wrong) == 0 {
			said = append(said, parent+": Accepted, ResolvedRefs")
			continue
		}
		ok = false
		said = append(said, parent+": "+strings.Join(wrong, ", "))
	}
	return ok, strings.Join(said, "; ")
}
