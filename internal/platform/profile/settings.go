package profile

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llm-gitops/platform/internal/platform/schedule"
)

// ModelAnnotation names the model a vLLM Deployment serves (vLLM's model_name).
const ModelAnnotation = "platform.llm/model"

// Workload is a model's Deployment and its ScaledObject in a rendered env.
type Workload struct {
	Deployment, ScaledObject *unstructured.Unstructured
}

// FindWorkload finds the Deployment serving model in objs: the one named deployment when it is
// given, else the only one annotated with the model that a ScaledObject scales and that is not
// a canary (label platform.llm/track: canary), and that ScaledObject.
func FindWorkload(objs []*unstructured.Unstructured, model, deployment string) (Workload, error) {
	scaled := map[string]*unstructured.Unstructured{} // namespace/deployment → ScaledObject
	for _, o := range objs {
		if o.GetKind() == "ScaledObject" {
			if name, _, _ := unstructured.NestedString(o.Object, "spec", "scaleTargetRef", "name"); name != "" {
				scaled[o.GetNamespace()+"/"+name] = o
			}
		}
	}
	var found []Workload
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetAnnotations()[ModelAnnotation] != model {
			continue
		}
		if deployment != "" && o.GetName() != deployment || deployment == "" && o.GetLabels()["platform.llm/track"] == "canary" {
			continue
		}
		so := scaled[o.GetNamespace()+"/"+o.GetName()]
		if so == nil && deployment == "" {
			continue
		}
		found = append(found, Workload{Deployment: o, ScaledObject: so})
	}
	switch {
	case len(found) == 1 && found[0].ScaledObject == nil:
		return Workload{}, fmt.Errorf("Deployment %s/%s has no ScaledObject: the profile sets a ScaledObject's threshold and minimums",
			found[0].Deployment.GetNamespace(), found[0].Deployment.GetName())
	case len(found) == 1:
		return found[0], nil
	case len(found) == 0:
		return Workload{}, fmt.Errorf("no Deployment annotated %s: %s with a ScaledObject in the env", ModelAnnotation, model)
	}
	var names []string
	for _, w := range found {
		names = append(names, w.Deployment.GetName())
	}
	return Workload{}, fmt.Errorf("Deployments %s all serve %s with a ScaledObject: name one with --deployment", strings.Join(names, ", "), model)
}

// Settings reads what the ScaledObject says now: minimum, maximum, and the threshold of the
// trigger on vllm:num_requests_waiting.
func (w Workload) Settings() Settings {
	so := w.ScaledObject
	s := Settings{ScaledObject: so.GetNamespace() + "/" + so.GetName()}
	s.WarmMinimum, _, _ = unstructured.NestedInt64(so.Object, "spec", "minReplicaCount")
	s.MaxReplicas, _, _ = unstructured.NestedInt64(so.Object, "spec", "maxReplicaCount")
	triggers, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
	for i, t := range triggers {
		m, _ := t.(map[string]any)
		query, _, _ := unstructured.NestedString(m, "metadata", "query")
		threshold, _, _ := unstructured.NestedString(m, "metadata", "threshold")
		if strings.Contains(query, "vllm:num_requests_waiting") {
			s.Threshold, _ = strconv.ParseFloat(threshold, 64)
			s.Trigger, s.TriggerQuery = i, query
			s.TriggerName, _ = m["name"].(string)
		}
	}
	return s
}

// ProposeFrom proposes a stored profile's settings against a rendered env and its schedule (nil
// without one): the profile's own Deployment (its Service's name), what its ScaledObject says, and
// the targets the profile was made for.
func ProposeFrom(p *Profile, objs []*unstructured.Unstructured, sched *schedule.Schedule) (*Proposal, Workload, error) {
	wl, err := FindWorkload(objs, p.Model, p.Service)
	if err != nil {
		return nil, Workload{}, err
	}
	settings := wl.Settings()
	settings.Schedule = sched
	prop, err := Propose(p, settings, p.Targets())
	return prop, wl, err
}
