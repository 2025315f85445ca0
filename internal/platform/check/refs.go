package check

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ExternalRefsAnnotation, on a workload, names what its pods refer to that is made out of band
// (by hand, by a controller the render does not show): kind/name pairs separated by commas, the
// kind one of secret, configmap, persistentvolumeclaim (or pvc), serviceaccount, priorityclass,
// e.g. "secret/registry-pull, configmap/site-ca". Rule refs-resolve takes them as present.
const ExternalRefsAnnotation = "auditor.llm-gitops.io/external-refs"

var (
	secretGK         = schema.GroupKind{Kind: "Secret"}
	configMapGK      = schema.GroupKind{Kind: "ConfigMap"}
	serviceAccountGK = schema.GroupKind{Kind: "ServiceAccount"}
	pvcGK            = schema.GroupKind{Kind: "PersistentVolumeClaim"}
	priorityClassGK  = schema.GroupKind{Group: "scheduling.k8s.io", Kind: "PriorityClass"}
)

// externalRefKinds maps the annotation's kind names to kinds.
var externalRefKinds = map[string]schema.GroupKind{
	"secret": secretGK, "configmap": configMapGK, "serviceaccount": serviceAccountGK,
	"persistentvolumeclaim": pvcGK, "pvc": pvcGK, "priorityclass": priorityClassGK,
}

// builtinPriorityClasses exist in every cluster (the API server creates them).
var builtinPriorityClasses = []string{"system-cluster-critical", "system-node-critical"}

// refsResolve checks that every Secret, ConfigMap, PersistentVolumeClaim, ServiceAccount and
// PriorityClass a workload's pods refer to (podRefs: volumes, envFrom, env, image pull secrets,
// serviceAccountName, priorityClassName) exists where the pod looks for it: in the pod's
// namespace (PriorityClasses are cluster-scoped) in the env's render, or made there by a known
// producer (producedObjects), or named in the workload's ExternalRefsAnnotation. A reference
// marked optional: true is not checked. A pod whose Secret or ConfigMap is missing never starts
// (CreateContainerConfigError, or a volume that never mounts), one whose claim is missing stays
// Pending, and one whose ServiceAccount or PriorityClass is missing is not even created; Argo CD
// then waits on the workload's health forever, and every later wave with it.
//
// A key it reads one by one (a secretKeyRef or configMapKeyRef, a volume's items) must be in the
// object when the render knows its keys: a rendered Secret or ConfigMap, an ExternalSecret's
// spec.data, a Certificate's tls.crt, tls.key and ca.crt. The pod fails the same way without it.
func refsResolve(objs []*unstructured.Unstructured) []Violation {
	have := producedObjects(objs)
	keys := knownKeys(objs)
	var out []Violation
	for _, o := range objs {
		pod := podTemplate(o)
		if pod == nil {
			continue
		}
		external, bad := externalRefs(o)
		out = append(out, bad...)
		for _, r := range unresolvedRefs(o, have, external) {
			out = append(out, Violation{Rule: "refs-resolve", Object: id(o), Message: fmt.Sprintf(
				"%s refers to %s (%s), which the render neither has nor makes %s: %s; render it, make it with a producer the rule knows (an ExternalSecret, a SealedSecret, a Certificate, a CloudNativePG Cluster), or name it in annotation %s if it is made out of band",
				id(o), refName(r), r.via, refWhere(r), missingEffect(r.gk), ExternalRefsAnnotation)})
		}
		for _, m := range missingKeys(o, keys, external) {
			out = append(out, Violation{Rule: "refs-resolve", Object: id(o), Message: fmt.Sprintf(
				"%s reads key %q of %s (%s), which it does not have (its keys: %s): %s; or name it in annotation %s if keys are added out of band",
				id(o), m.key, refName(m.ref), m.ref.via, keyList(m.have), missingEffect(m.ref.gk), ExternalRefsAnnotation)})
		}
	}
	return sortViolations(out)
}

// missingKey is a key a pod reads that its Secret or ConfigMap lacks.
type missingKey struct {
	ref  objRef
	key  string
	have []string // the object's keys, sorted
}

// keyList is keys for a message: at most 10, "none" for none.
func keyList(keys []string) string {
	switch {
	case len(keys) == 0:
		return "none"
	case len(keys) > 10:
		return fmt.Sprintf("%s and %d more", strings.Join(keys[:10], ", "), len(keys)-10)
	}
	return strings.Join(keys, ", ")
}

// missingKeys lists the keys o's pods read one by one that their object, of known keys, lacks.
// An object named in the workload's ExternalRefsAnnotation is taken to have them.
func missingKeys(o *unstructured.Unstructured, known map[string][]string, external map[string]bool) []missingKey {
	var out []missingKey
	for _, r := range podRefs(podTemplate(o), o.GetNamespace()) {
		have, ok := known[r.key()]
		if r.optional || !ok || have == nil || external[r.key()] {
			continue
		}
		for _, k := range r.keys {
			if !slices.Contains(have, k) {
				out = append(out, missingKey{ref: r, key: k, have: have})
			}
		}
	}
	return out
}

// knownKeys is the keys of every Secret and ConfigMap whose keys the render knows, by objRef key;
// a nil entry means they cannot be known. Known are: rendered ones with data (data, stringData,
// binaryData; an empty one, or one a controller injects into, is filled by someone else; a
// service-account token gets token, ca.crt and namespace), an ExternalSecret's target when it
// owns it and spec.data lists all (creationPolicy Owner or Orphan, no dataFrom, no template), a
// Certificate's Secret (tls.crt, tls.key and ca.crt, which cert-manager writes only when the
// issuer returns a CA; its additional output formats and keystores), and kube-root-ca.crt.
// Two producers of one object add up. Key names only: never a value.
func knownKeys(objs []*unstructured.Unstructured) map[string][]string {
	out := map[string][]string{}
	add := func(gk schema.GroupKind, ns, name string, keys []string) {
		k := objRef{gk: gk, namespace: ns, name: name}.key()
		if prev, seen := out[k]; seen && (prev == nil || keys == nil) {
			out[k] = nil // one producer of unknown keys: unknown
			return
		}
		keys = append(out[k], keys...)
		slices.Sort(keys)
		out[k] = slices.Compact(keys)
	}
	fields := func(o *unstructured.Unstructured, names ...string) []string {
		keys := []string{}
		for _, f := range names {
			m, _, _ := unstructured.NestedMap(o.Object, f)
			for k := range m {
				keys = append(keys, k)
			}
		}
		return keys
	}
	for _, o := range objs {
		ns := o.GetNamespace()
		switch gk := o.GroupVersionKind().GroupKind(); {
		case gk == secretGK:
			keys := fields(o, "data", "stringData")
			if t, _, _ := unstructured.NestedString(o.Object, "type"); t == "kubernetes.io/service-account-token" {
				keys = append(keys, "token", "ca.crt", "namespace")
			}
			if len(keys) == 0 || injected(o) {
				keys = nil
			}
			add(secretGK, ns, o.GetName(), keys)
		case gk == configMapGK:
			keys := fields(o, "data", "binaryData")
			if len(keys) == 0 || injected(o) {
				keys = nil
			}
			add(configMapGK, ns, o.GetName(), keys)
		case gk.Group == "external-secrets.io" && gk.Kind == "ExternalSecret":
			name := externalSecretTarget(o)
			from, _, _ := unstructured.NestedSlice(o.Object, "spec", "dataFrom")
			tmpl, _, _ := unstructured.NestedMap(o.Object, "spec", "target", "template")
			policy, _, _ := unstructured.NestedString(o.Object, "spec", "target", "creationPolicy")
			if len(from) > 0 || tmpl != nil || policy == "Merge" || policy == "None" {
				add(secretGK, ns, name, nil) // keys from the provider, or another owner's
				continue
			}
			data, _, _ := unstructured.NestedSlice(o.Object, "spec", "data")
			keys := []string{}
			for _, d := range data {
				if k, _, _ := unstructured.NestedString(asMap(d), "secretKey"); k != "" {
					keys = append(keys, k)
				}
			}
			add(secretGK, ns, name, keys)
		case gk.Group == "cert-manager.io" && gk.Kind == "Certificate":
			if name, _, _ := unstructured.NestedString(o.Object, "spec", "secretName"); name != "" {
				add(secretGK, ns, name, certificateKeys(o))
			}
		case gk == sealedSecretGK:
			keys := []string{}
			enc, _, _ := unstructured.NestedMap(o.Object, "spec", "encryptedData")
			for k := range enc {
				keys = append(keys, k)
			}
			if tmpl, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "data"); len(tmpl) > 0 {
				keys = nil // the template computes more keys
			}
			add(secretGK, ns, o.GetName(), keys)
		}
		if ns != "" {
			add(configMapGK, ns, "kube-root-ca.crt", []string{"ca.crt"})
		}
	}
	return out
}

// externalSecretTarget is the Secret an ExternalSecret writes: spec.target.name, by default its
// own name.
func externalSecretTarget(o *unstructured.Unstructured) string {
	if name, _, _ := unstructured.NestedString(o.Object, "spec", "target", "name"); name != "" {
		return name
	}
	return o.GetName()
}

// injected says whether a controller adds keys to o: OpenShift's CA bundle injection.
func injected(o *unstructured.Unstructured) bool {
	for k := range o.GetAnnotations() {
		if strings.Contains(k, "inject-cabundle") {
			return true
		}
	}
	_, ok := o.GetLabels()["config.openshift.io/inject-trusted-cabundle"]
	return ok
}

// certificateKeys are the keys cert-manager writes to a Certificate's Secret.
func certificateKeys(o *unstructured.Unstructured) []string {
	keys := []string{"tls.crt", "tls.key", "ca.crt"}
	formats, _, _ := unstructured.NestedSlice(o.Object, "spec", "additionalOutputFormats")
	for _, f := range formats {
		switch t, _, _ := unstructured.NestedString(asMap(f), "type"); t {
		case "CombinedPEM":
			keys = append(keys, "tls-combined.pem")
		case "DER":
			keys = append(keys, "key.der")
		}
	}
	if ok, _, _ := unstructured.NestedBool(o.Object, "spec", "keystores", "jks", "create"); ok {
		keys = append(keys, "keystore.jks", "truststore.jks")
	}
	if ok, _, _ := unstructured.NestedBool(o.Object, "spec", "keystores", "pkcs12", "create"); ok {
		keys = append(keys, "keystore.p12", "truststore.p12")
	}
	return keys
}

// unresolvedRefs lists o's pod references that resolve to nothing.
func unresolvedRefs(o *unstructured.Unstructured, have map[string]bool, external map[string]bool) []objRef {
	var out []objRef
	seen := map[string]bool{}
	for _, r := range podRefs(podTemplate(o), o.GetNamespace()) {
		if r.optional || seen[r.key()+r.via] {
			continue
		}
		seen[r.key()+r.via] = true
		if have[r.key()] || external[r.key()] {
			continue
		}
		out = append(out, r)
	}
	return out
}

// sealedSecretGK is Bitnami's SealedSecret: its controller writes the Secret of its name, with
// the keys of spec.encryptedData.
var sealedSecretGK = schema.GroupKind{Group: "bitnami.com", Kind: "SealedSecret"}

// producedObjects is every object the env's render has or makes, by objRef key: the rendered
// objects themselves; what every namespace gets (ServiceAccount default, ConfigMap
// kube-root-ca.crt) and the API server's PriorityClasses; the Secret an ExternalSecret writes
// (spec.target.name, default its own name) and a Certificate's spec.secretName; a CloudNativePG
// Cluster's ServiceAccount (the Cluster's name) and Secrets: <cluster>-app unless
// bootstrap.initdb.secret names the owner's secret, <cluster>-superuser with
// enableSuperuserAccess, and its generated certificates (<cluster>-ca, -server, -replication).
func producedObjects(objs []*unstructured.Unstructured) map[string]bool {
	have := map[string]bool{}
	add := func(gk schema.GroupKind, ns, name string) {
		have[objRef{gk: gk, namespace: ns, name: name}.key()] = true
	}
	for _, pc := range builtinPriorityClasses {
		add(priorityClassGK, "", pc)
	}
	for _, o := range objs {
		have[objKey(o)] = true
		ns := o.GetNamespace()
		switch gk := o.GroupVersionKind().GroupKind(); {
		case gk.Group == "external-secrets.io" && gk.Kind == "ExternalSecret":
			add(secretGK, ns, externalSecretTarget(o))
		case gk.Group == "cert-manager.io" && gk.Kind == "Certificate":
			if name, _, _ := unstructured.NestedString(o.Object, "spec", "secretName"); name != "" {
				add(secretGK, ns, name)
			}
		case gk == sealedSecretGK: // Bitnami's controller writes the Secret of its name
			add(secretGK, ns, o.GetName())
		case gk == cnpgCluster:
			name := o.GetName()
			add(serviceAccountGK, ns, name)
			if own, _, _ := unstructured.NestedString(o.Object, "spec", "bootstrap", "initdb", "secret", "name"); own == "" {
				add(secretGK, ns, name+"-app")
			}
			if su, _, _ := unstructured.NestedBool(o.Object, "spec", "enableSuperuserAccess"); su {
				add(secretGK, ns, name+"-superuser")
			}
			for _, s := range []string{"-ca", "-server", "-replication"} {
				add(secretGK, ns, name+s)
			}
		}
	}
	// Every namespace has these (the API server's controllers make them).
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			add(serviceAccountGK, ns, "default")
			add(configMapGK, ns, "kube-root-ca.crt")
		}
	}
	return have
}

// externalRefs reads a workload's ExternalRefsAnnotation (objRef keys in the workload's
// namespace); an entry it cannot read is a violation.
func externalRefs(o *unstructured.Unstructured) (map[string]bool, []Violation) {
	v, ok := o.GetAnnotations()[ExternalRefsAnnotation]
	if !ok {
		return nil, nil
	}
	out := map[string]bool{}
	var bad []Violation
	for _, entry := range strings.Split(v, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		kind, name, _ := strings.Cut(entry, "/")
		gk, known := externalRefKinds[strings.ToLower(strings.TrimSpace(kind))]
		if !known || strings.TrimSpace(name) == "" {
			bad = append(bad, Violation{Rule: "refs-resolve", Object: id(o), Message: fmt.Sprintf(
				"%s: annotation %s entry %q is not kind/name with kind one of secret, configmap, persistentvolumeclaim, serviceaccount, priorityclass",
				id(o), ExternalRefsAnnotation, entry)})
			continue
		}
		r := objRef{gk: gk, namespace: o.GetNamespace(), name: strings.TrimSpace(name)}
		if gk == priorityClassGK {
			r.namespace = ""
		}
		out[r.key()] = true
	}
	return out, bad
}

func refName(r objRef) string {
	if r.namespace == "" {
		return r.gk.Kind + " " + r.name
	}
	return r.gk.Kind + " " + r.namespace + "/" + r.name
}

func refWhere(r objRef) string {
	if r.namespace == "" {
		return "in the cluster"
	}
	return "in namespace " + r.namespace
}

// missingEffect says what a pod does without an object of this kind.
func missingEffect(gk schema.GroupKind) string {
	switch gk {
	case secretGK, configMapGK:
		return "its pods never start (CreateContainerConfigError, or a volume that never mounts)"
	case pvcGK:
		return "its pods stay Pending"
	case serviceAccountGK:
		return "its pods are never created (the API server rejects them)"
	case priorityClassGK:
		return "its pods are never created (admission rejects an unknown priorityClassName)"
	}
	return "its pods do not start"
}
