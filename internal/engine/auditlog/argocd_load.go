package auditlog

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ArgoCDRecordSelector picks the Events argocd-server records on Applications.
const ArgoCDRecordSelector = "involvedObject.kind=Application,source=argocd-server"

// LoadArgoCD reads once the Events argocd-server recorded on the Applications of namespace
// (Argo CD's) into s, and names argocd-server's ServiceAccount there as the user it writes as:
// s's writes by that ServiceAccount then name the Argo CD user who asked (ThroughArgoCD).
func LoadArgoCD(ctx context.Context, cs kubernetes.Interface, namespace string, s *Store) error {
	s.SetArgoCDServer(ArgoCDServerUser(namespace))
	opts := metav1.ListOptions{FieldSelector: ArgoCDRecordSelector, Limit: 500}
	for {
		list, err := cs.CoreV1().Events(namespace).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("argo cd's records in %s: %w", namespace, err)
		}
		for i := range list.Items {
			if a, ok := ParseArgoCDEvent(&list.Items[i]); ok {
				s.AddArgoCD(a)
			}
		}
		if list.Continue == "" {
			return nil
		}
		opts.Continue = list.Continue
	}
}
