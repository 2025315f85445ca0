package check

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// TestNetPolicySemantics: each case is one policy in namespace b guarding pod "db" (ingress) or
// in namespace a guarding pod "app" (egress), and the flow app (a) → db (b) on TCP 5432.
func TestNetPolicySemantics(t *testing.T) {
	app := netPeer{what: "app", namespace: "a", labels: map[string]string{"role": "app"}}
	db := netPeer{what: "db", namespace: "b", labels: map[string]string{"role": "db"}, ports: map[string]namedPort{"pg": {5432, corev1.ProtocolTCP}}}
	nsA := `{apiVersion: v1, kind: Namespace, metadata: {name: a, labels: {team: x}}}`
	cases := []struct {
		name  string
		ns    string // the policy's namespace, "" for no policy
		spec  string
		proto corev1.Protocol
		want  bool
	}{
		{"no policy: not isolated", "", "", "", true},
		{"default deny ingress", "b", `{podSelector: {}, policyTypes: [Ingress]}`, "", false},
		{"policyTypes unset means Ingress", "b", `{podSelector: {}}`, "", false},
		{"policyTypes unset with egress rules isolates egress too", "a", `{podSelector: {}, egress: [{to: [{podSelector: {}}]}]}`, "", false},
		{"a policy that selects other pods", "b", `{podSelector: {matchLabels: {role: web}}, policyTypes: [Ingress]}`, "", true},
		{"an empty from allows all", "b", `{podSelector: {}, ingress: [{ports: [{port: 5432}]}]}`, "", true},
		{"podSelector alone is the policy's namespace", "b", `{podSelector: {}, ingress: [{from: [{podSelector: {matchLabels: {role: app}}}]}]}`, "", false},
		{"namespaceSelector and podSelector in one peer: both", "b", `{podSelector: {}, ingress: [{from: [{namespaceSelector: {matchLabels: {team: x}}, podSelector: {matchLabels: {role: app}}}]}]}`, "", true},
		{"the same as two peers: either", "b", `{podSelector: {}, ingress: [{from: [{namespaceSelector: {matchLabels: {team: z}}}, {podSelector: {matchLabels: {role: app}}}]}]}`, "", false},
		{"the namespace's name label", "b", `{podSelector: {}, ingress: [{from: [{namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [a]}]}}]}]}`, "", true},
		{"a named port of the destination", "b", `{podSelector: {}, ingress: [{ports: [{port: pg}]}]}`, "", true},
		{"a port range", "b", `{podSelector: {}, ingress: [{ports: [{port: 5000, endPort: 6000}]}]}`, "", true},
		{"another protocol", "b", `{podSelector: {}, ingress: [{ports: [{port: 5432, protocol: UDP}]}]}`, "", false},
		{"UDP flow, UDP rule", "b", `{podSelector: {}, ingress: [{ports: [{port: 5432, protocol: UDP}]}]}`, corev1.ProtocolUDP, true},
		{"an ipBlock does not match a pod", "b", `{podSelector: {}, ingress: [{from: [{ipBlock: {cidr: 0.0.0.0/0}}]}]}`, "", false},
		{"egress by port only", "a", `{podSelector: {}, policyTypes: [Egress], egress: [{ports: [{port: 5432}]}]}`, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := nsA
			if tc.ns != "" {
				doc += fmt.Sprintf("\n---\n{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: p, namespace: %s}, spec: %s}", tc.ns, tc.spec)
			}
			objs := parseObjects(t, doc)
			np, err := newNetPolicies(objs)
			require.NoError(t, err)
			proto := tc.proto
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			v := np.allows(app, db, 5432, proto)
			assert.Equal(t, tc.want, v.allowed, v.reason)
			if !v.allowed {
				assert.Contains(t, v.reason, "no rule of NetworkPolicy p in")
			}
		})
	}

	// An address outside the cluster: only an ipBlock (or no peer at all) covers it.
	out := netPeer{what: "store", ip: netip.MustParseAddr("203.0.113.10")}
	objs := parseObjects(t, `{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: p, namespace: a},
  spec: {podSelector: {}, policyTypes: [Egress], egress: [{to: [{ipBlock: {cidr: 0.0.0.0/0, except: [203.0.113.0/24]}}, {namespaceSelector: {}}]}]}}`)
	np, err := newNetPolicies(objs)
	require.NoError(t, err)
	assert.False(t, np.allows(app, out, 443, corev1.ProtocolTCP).allowed, "excepted, and a namespaceSelector covers pods only")
	assert.True(t, np.allows(app, db, 443, corev1.ProtocolTCP).allowed, "namespaceSelector {} covers every namespace's pods")
}
