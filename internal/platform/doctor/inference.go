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
