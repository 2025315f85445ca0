package auditlog

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llm-gitops/platform/internal/engine/drift"
)

// argoEvent is an Event as argocd-server v3.6's logAppEvent records it.
func argoEvent(user, reason, message string, at time.Time) *corev1.Event {
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("prod-llm-rag.%x", at.UnixNano()), Namespace: "argocd",
			Annotations: map[string]string{"user": user, "dest-namespace": "rag", "dest-server": "https://kubernetes.default.svc"}},
		InvolvedObject: corev1.ObjectReference{Kind: "Application", Name: "prod-llm-rag", Namespace: "argocd", APIVersion: "argoproj.io/v1alpha1"},
		Source:         corev1.EventSource{Component: "argocd-server"},
		FirstTimestamp: metav1.NewTime(at.Truncate(time.Second)), Reason: reason, Message: message, Type: "Normal",
	}
}

func TestParseArgoCDEvent(t *testing.T) {
	at := time.Date(2026, 12, 8, 1, 2, 3, 456_000_000, time.UTC)
	tests := []struct {
		name string
		ev   *corev1.Event
		want *ArgoCDAction
	}{
		{"patch", argoEvent("alice", "ResourceUpdated", "alice patched resource apps/StatefulSet 'qdrant'", at),
			&ArgoCDAction{User: "alice", Verb: "patch", Group: "apps", Kind: "StatefulSet", Name: "qdrant", DestNamespace: "rag", At: at}},
		{"delete of the core group", argoEvent("bob@example.com", "ResourceDeleted", "bob@example.com deleted resource /ConfigMap 'settings'", at),
			&ArgoCDAction{User: "bob@example.com", Verb: "delete", Kind: "ConfigMap", Name: "settings", DestNamespace: "rag", At: at}},
		{"no user", argoEvent("Unknown user", "ResourceUpdated", "Unknown user patched resource apps/StatefulSet 'qdrant'", at), nil},
		{"the application itself", argoEvent("alice", "ResourceUpdated", "alice updated application spec", at), nil},
		{"reason and message disagree", argoEvent("alice", "ResourceDeleted", "alice patched resource apps/StatefulSet 'qdrant'", at), nil},
		{"an action", argoEvent("alice", "ResourceActionRan", "alice ran action restart on resource apps/Deployment/web", at), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseArgoCDEvent(tt.ev)
			if tt.want == nil {
				assert.False(t, ok, "%+v", got)
				return
			}
			require.True(t, ok)
			assert.Equal(t, *tt.want, got)
		})
	}
	other := argoEvent("alice", "ResourceUpdated", "alice patched resource apps/StatefulSet 'qdrant'", at)
	other.Source.Component = "argocd-application-controller"
	_, ok := ParseArgoCDEvent(other)
	assert.False(t, ok, "only argocd-server's records name its users")
}

func TestThroughArgoCD(t *testing.T) {
	const server = "system:serviceaccount:argocd:argocd-server"
	at := time.Date(2026, 12, 8, 1, 2, 3, 0, time.UTC)
	sts := schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	s := NewStore(0)
	s.SetArgoCDServer(server)
	s.AddArgoCD(ArgoCDAction{User: "alice", Verb: "patch", Group: "apps", Kind: "StatefulSet", Name: "qdrant", DestNamespace: "rag", At: at.Add(300 * time.Millisecond)})
	s.AddArgoCD(ArgoCDAction{User: "bob", Verb: "patch", Group: "apps", Kind: "StatefulSet", Name: "qdrant", DestNamespace: "rag", At: at.Add(20 * time.Second)})
	s.AddArgoCD(ArgoCDAction{User: "carol", Verb: "delete", Group: "", Kind: "ConfigMap", Name: "settings", DestNamespace: "rag", At: at.Add(time.Second)})
	write := func(user, verb string, t time.Time) *drift.Actor {
		return &drift.Actor{User: user, Verb: verb, Time: t.Format(time.RFC3339), SourceIPs: []string{"10.0.0.9"}, From: SourceAuditLog}
	}
	tests := []struct {
		name     string
		a        *drift.Actor
		gk       schema.GroupKind
		obj      string
		wantUser string
	}{
		{"argocd-server's patch names alice", write(server, "patch", at), sts, "qdrant", "alice"},
		{"as admission says a patch", write(server, "update", at), sts, "qdrant", "alice"},
		{"the later patch names bob", write(server, "patch", at.Add(20*time.Second)), sts, "qdrant", "bob"},
		{"a delete names carol", write(server, "delete", at), schema.GroupKind{Kind: "ConfigMap"}, "settings", "carol"},
		{"another object", write(server, "patch", at), sts, "redis", server},
		{"another verb", write(server, "delete", at), sts, "qdrant", server},
		{"no record that late", write(server, "patch", at.Add(3*time.Minute)), sts, "qdrant", server},
		{"a record before the write", write(server, "patch", at.Add(10*time.Second)), sts, "qdrant", "bob"},
		{"a hand edit stays the person's", write("dave", "patch", at), sts, "qdrant", "dave"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := s.ThroughArgoCD(tt.a, tt.gk, "rag", tt.obj)
			assert.Equal(t, tt.wantUser, got.User)
			assert.Equal(t, tt.wantUser != tt.a.User, s.ViaArgoCDServer(tt.a) && got.From == SourceArgoCD)
			if got.User != tt.a.User {
				assert.Equal(t, server, got.Via)
				assert.Empty(t, got.SourceIPs, "argocd-server's address is not the person's")
				assert.Equal(t, " (named by Argo CD's record; written by "+server+")", got.NamedBy())
				assert.Equal(t, SourceAuditLog, tt.a.From, "the write held is not changed")
			}
		})
	}
}
