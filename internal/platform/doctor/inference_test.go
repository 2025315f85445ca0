package doctor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
)

func TestInferenceChecks(t *testing.T) {
	gateway := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "llm-gateway", "namespace": "llm-inference"}, "spec": map[string]any{"gatewayClassName": "edge"}}}
	pool := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
		"metadata": map[string]any{"name": "qwen", "namespace": "llm-inference"}}}
	class := func(controller string) runtime.Object {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
			"metadata": map[string]any{"name": "edge"}, "spec": map[string]any{"controllerName": controller}}}
	}
	served := map[schema.GroupVersion]map[string]resource{gatewayClassGVR.GroupVersion(): {"GatewayClass": {}}}
	for _, tc := range []struct {
		name    string
		objs    []*unstructured.Unstructured
		cluster []runtime.Object
		want    []Check
	}{
		{name: "no pool: nothing to check", objs: []*unstructured.Unstructured{gateway}, cluster: []runtime.Object{class("example.com/plain")}},
		{name: "a class of Istio", objs: []*unstructured.Unstructured{gateway, pool}, cluster: []runtime.Object{class("istio.io/gateway-controller")},
			want: []Check{{Area: "object", Name: "GatewayClass edge routes to InferencePools", OK: true,
				Detail: "controller istio.io/gateway-controller: Istio (with ENABLE_GATEWAY_API_INFERENCE_EXTENSION=true)"}}},
		{name: "a class whose controller knows no pools", objs: []*unstructured.Unstructured{gateway, pool}, cluster: []runtime.Object{class("example.com/plain")},
			want: []Check{{Area: "object", Name: "GatewayClass edge routes to InferencePools",
				Detail: "controller example.com/plain is not one that routes to an InferencePool's endpoint picker; named by Gateway llm-inference/llm-gateway",
				Fix:    `use a GatewayClass of an implementation with the inference extension (docs/platform.md, "The request path")`}}},
		{name: "the class missing", objs: []*unstructured.Unstructured{gateway, pool},
			want: []Check{{Area: "object", Name: "GatewayClass edge routes to InferencePools", OK: true, Skipped: true, Detail: "the GatewayClass is missing (see its own check)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{gatewayClassGVR: "GatewayClassList"}, tc.cluster...)
			assert.Equal(t, tc.want, inferenceChecks(context.Background(), dyn, tc.objs, served))
		})
	}
}
