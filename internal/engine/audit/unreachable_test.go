package audit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/live"
)

// The first audit after another cluster went away fails on the wire: that is said as the
// cluster being unreachable, as the fleet's probes say it; an answer of the API server is not.
func TestUnreachableNamesTheClusterOfATransportError(t *testing.T) {
	refused := fmt.Errorf("prod: openapi v3 discovery: %w", &url.Error{Op: "Get", URL: "https://127.0.0.1:41623/openapi/v3", Err: syscall.ECONNREFUSED})
	member := &unit{name: "edge", cluster: &live.Cache{}, clusterName: "edge-1"}
	for _, tc := range []struct {
		name string
		u    *unit
		err  error
		want string
	}{
		{"refused on another cluster", member, refused, "Application edge: cluster edge-1 unreachable: prod: openapi v3 discovery: Get \"https://127.0.0.1:41623/openapi/v3\": connection refused"},
		{"dial refused", member, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, "Application edge: cluster edge-1 unreachable: dial tcp: connection refused"},
		// An aggregated API that is down, a watch that never synced (RBAC), a bad certificate:
		// the cluster answers, so it is not unreachable.
		{"an aggregated API down", member, apierrors.NewServiceUnavailable("metrics"), "metrics"},
		{"a cache that never synced", member, fmt.Errorf("configmaps not synced: %w", context.DeadlineExceeded), "configmaps not synced: context deadline exceeded"},
		{"a certificate", member, &url.Error{Op: "Get", URL: "https://x", Err: errors.New("x509: certificate signed by unknown authority")}, `Get "https://x": x509: certificate signed by unknown authority`},
		{"an answer about the request", member, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "x", errors.New("no")), `configmaps "x" is forbidden: no`},
		{"Argo CD's own cluster", &unit{name: "prod"}, refused, refused.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, unreachable(tc.u, tc.err).Error())
		})
	}
}
