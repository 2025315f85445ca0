package check

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// This file evaluates NetworkPolicies as the API documents them, for rule flows-allowed: a
// connection is allowed when the source may send it (egress) and the destination may receive it
// (ingress). A pod is isolated in a direction once any policy of its namespace selects it with
// that policy type; an isolated pod takes what one rule of one selecting policy allows. A peer
// with a podSelector alone means pods of the policy's namespace, a namespaceSelector alone every
// pod of the selected namespaces, both together the selected pods of those namespaces. ipBlock
// peers match addresses outside the cluster only: which pod addresses an ipBlock covers depends on
// the network plugin, so a pod-to-pod flow is never allowed by one. A pod on the host network has
// its node's address: policies do not apply to it, and only a rule without peers reaches it.

// netPeer is one end of a flow: a pod (namespace, labels, named ports) or an address outside the
// cluster.
type netPeer struct {
	// what names it in a finding: "Deployment llm-api/rag-api", or an endpoint's name.
	what      string
	namespace string
	labels    map[string]string
	// ports are the pod's named container ports: name → number and protocol.
	ports map[string]namedPort
	ip    netip.Addr // outside the cluster when valid
	// host is a pod on its node's network: NetworkPolicy does not apply to it, and a peer
	// selector never matches it (its address is the node's, unknown to the render).
	host bool
}

type namedPort struct {
	number   int32
	protocol corev1.Protocol
}

func (p netPeer) external() bool { return p.ip.IsValid() }

// netPolicies are the rendered NetworkPolicies by namespace, and the labels of each namespace.
type netPolicies struct {
	byNS     map[string][]*networkingv1.NetworkPolicy
	nsLabels map[string]map[string]string
}

func newNetPolicies(objs []*unstructured.Unstructured) (*netPolicies, error) {
	np := &netPolicies{byNS: map[string][]*networkingv1.NetworkPolicy{}, nsLabels: map[string]map[string]string{}}
	for _, o := range objs {
		switch {
		case o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "":
			np.nsLabels[o.GetName()] = o.GetLabels()
		case o.GetKind() == "NetworkPolicy" && o.GroupVersionKind().Group == "networking.k8s.io":
			var p networkingv1.NetworkPolicy
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &p); err != nil {
				return nil, fmt.Errorf("NetworkPolicy %s/%s: %w", o.GetNamespace(), o.GetName(), err)
			}
			np.byNS[p.Namespace] = append(np.byNS[p.Namespace], &p)
		}
	}
	return np, nil
}

// namespaceLabels are the labels of namespace ns: the rendered Namespace's, and the name label
// the API server sets on every namespace.
func (np *netPolicies) namespaceLabels(ns string) labels.Set {
	out := labels.Set{"kubernetes.io/metadata.name": ns}
	for k, v := range np.nsLabels[ns] {
		out[k] = v
	}
	return out
}

// verdict says whether a flow is allowed, and why not.
type verdict struct {
	allowed bool
	reason  string
}

// allows evaluates the flow from src to dst on port/protocol.
func (np *netPolicies) allows(src, dst netPeer, port int32, proto corev1.Protocol) verdict {
	if !src.external() && !src.host {
		if v := np.direction(src, dst, port, proto, networkingv1.PolicyTypeEgress); !v.allowed {
			return v
		}
	}
	if !dst.external() && !dst.host {
		if v := np.direction(dst, src, port, proto, networkingv1.PolicyTypeIngress); !v.allowed {
			return v
		}
	}
	return verdict{allowed: true}
}

// direction evaluates the policies of pod's namespace for one direction: egress when pod sends to
// other, ingress when pod receives from other. The port is always the destination's.
func (np *netPolicies) direction(pod, other netPeer, port int32, proto corev1.Protocol, dir networkingv1.PolicyType) verdict {
	var selecting []string
	for _, p := range np.byNS[pod.namespace] {
		if !hasPolicyType(p, dir) || !selectorMatches(&p.Spec.PodSelector, pod.labels) {
			continue
		}
		selecting = append(selecting, p.Name)
		if dir == networkingv1.PolicyTypeEgress {
			for _, r := range p.Spec.Egress {
				if np.peersMatch(p.Namespace, r.To, other) && portsMatch(r.Ports, port, proto, other) {
					return verdict{allowed: true}
				}
			}
		} else {
			for _, r := range p.Spec.Ingress {
				if np.peersMatch(p.Namespace, r.From, other) && portsMatch(r.Ports, port, proto, pod) {
					return verdict{allowed: true}
				}
			}
		}
	}
	if len(selecting) == 0 {
		return verdict{allowed: true} // not isolated in this direction
	}
	sort.Strings(selecting)
	side := "egress of the source"
	if dir == networkingv1.PolicyTypeIngress {
		side = "ingress of the destination"
	}
	return verdict{reason: fmt.Sprintf("%s: no rule of NetworkPolicy %s in %s allows it", side, strings.Join(selecting, ", "), pod.namespace)}
}

// hasPolicyType applies the API's default: Ingress always, Egress when the policy has egress rules.
func hasPolicyType(p *networkingv1.NetworkPolicy, t networkingv1.PolicyType) bool {
	if len(p.Spec.PolicyTypes) == 0 {
		return t == networkingv1.PolicyTypeIngress || len(p.Spec.Egress) > 0
	}
	for _, pt := range p.Spec.PolicyTypes {
		if pt == t {
			return true
		}
	}
	return false
}

// peersMatch says whether a rule's peers (empty: everyone) include other, for a policy of
// namespace ns.
func (np *netPolicies) peersMatch(ns string, peers []networkingv1.NetworkPolicyPeer, other netPeer) bool {
	if len(peers) == 0 {
		return true
	}
	for _, peer := range peers {
		switch {
		case peer.IPBlock != nil:
			if other.external() && ipBlockMatches(peer.IPBlock, other.ip) {
				return true
			}
		case other.external() || other.host:
		case peer.NamespaceSelector != nil:
			if selectorMatches(peer.NamespaceSelector, np.namespaceLabels(other.namespace)) &&
				(peer.PodSelector == nil || selectorMatches(peer.PodSelector, other.labels)) {
				return true
			}
		case peer.PodSelector != nil:
			if other.namespace == ns && selectorMatches(peer.PodSelector, other.labels) {
				return true
			}
		}
	}
	return false
}

func ipBlockMatches(b *networkingv1.IPBlock, ip netip.Addr) bool {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !cidr.Contains(ip) {
		return false
	}
	for _, e := range b.Except {
		if ex, err := netip.ParsePrefix(e); err == nil && ex.Contains(ip) {
			return false
		}
	}
	return true
}

// portsMatch says whether a rule's ports (empty: every port) include port/proto at the
// destination dst, whose named ports resolve a port given by name.
func portsMatch(ports []networkingv1.NetworkPolicyPort, port int32, proto corev1.Protocol, dst netPeer) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		want := corev1.ProtocolTCP
		if p.Protocol != nil {
			want = *p.Protocol
		}
		if want != proto {
			continue
		}
		switch {
		case p.Port == nil:
			return true
		case p.Port.Type == intstr.String:
			if named, ok := dst.ports[p.Port.StrVal]; ok && named.number == port && named.protocol == proto {
				return true
			}
		case p.EndPort != nil:
			if port >= p.Port.IntVal && port <= *p.EndPort {
				return true
			}
		case p.Port.IntVal == port:
			return true
		}
	}
	return false
}

func selectorMatches(sel *metav1.LabelSelector, set map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false // the API server rejects such a policy
	}
	return s.Matches(labels.Set(set))
}
