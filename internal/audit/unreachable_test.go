package audit

import (
	"errors"
	"fmt"
	"net/url"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/live"
)

// The first audit after another cluster went away fails on the wire: that is said as the
// cluster being unreachable, as the fleet's probes say it; an answer of the API server is not.
func TestUnreachableNamesTheClusterOfATransportError(t *testing.T) {
	refused := fmt.Errorf("prod: openapi v3 discovery: %w", &url.Error{Op: "Get", URL: "https://127.0.0.1:41623/openapi/v3", Err: syscall.ECONNREFUSED})
	member := &prepared{name: "edge", cluster: &live.Cache{}, clusterName: "edge-1"}
	for _, tc := range []struct {
		name string
		u    *prepared
		err  error
		want string
	}{
		{"refused on another cluster", member, refused, "Application edge: cluster edge-1 unreachable: prod: openapi v3 discovery: Get \"https://127.0.0.1:41623/openapi/v3\": connection refused"},
		{"not serving", member, apierrors.NewServiceUnavailable("etcd"), "Application edge: cluster edge-1 unreachable: etcd"},
		{"an answer about the request", member, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("no")), `configmaps "x" is forbidden: no`},
		{"Argo CD's own cluster", &prepared{name: "prod"}, refused, refused.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, unreachable(tc.u, tc.err).Error())
		})
	}
}
