package localcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/engine/manifest"
)

// CRDSource names CRD files inside a Go module at a pinned version.
type CRDSource struct {
	Module, Version string
	Files           []string
}

// UpstreamCRDs are the CRDs the platform's manifests use, taken from their projects' own modules.
var UpstreamCRDs = []CRDSource{
	{"github.com/argoproj/argo-cd/v3", "v3.6.1", []string{
		"manifests/crds/application-crd.yaml", "manifests/crds/applicationset-crd.yaml", "manifests/crds/appproject-crd.yaml"}},
	{"github.com/kedacore/keda/v2", "v2.21.0", []string{
		"config/crd/bases/keda.sh_scaledobjects.yaml", "config/crd/bases/keda.sh_scaledjobs.yaml",
		"config/crd/bases/keda.sh_triggerauthentications.yaml", "config/crd/bases/keda.sh_clustertriggerauthentications.yaml"}},
	{"sigs.k8s.io/karpenter", "v1.15.0", []string{
		"pkg/apis/crds/karpenter.sh_nodepools.yaml", "pkg/apis/crds/karpenter.sh_nodeclaims.yaml"}},
	// The AWS provider release built on sigs.k8s.io/karpenter v1.15.0 (its go.mod pins exactly that).
	{"github.com/aws/karpenter-provider-aws", "v1.15.0", []string{"pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml"}},
	{"sigs.k8s.io/gateway-api", "v1.7.0", []string{
		"config/crd/standard/gateway.networking.k8s.io_gatewayclasses.yaml", "config/crd/standard/gateway.networking.k8s.io_gateways.yaml",
		"config/crd/standard/gateway.networking.k8s.io_httproutes.yaml", "config/crd/standard/gateway.networking.k8s.io_referencegrants.yaml"}},
	// InferencePool (v1): the routes' backends, each with its endpoint picker.
	{"sigs.k8s.io/gateway-api-inference-extension", "v1.6.2", []string{
		"config/crd/bases/inference.networking.k8s.io_inferencepools.yaml"}},
	// InferenceObjective (v1alpha2): a request's priority in its pool, as the pickers' release reads
	// it (epp v1.5.0, base/vllm/picker.yaml); the v1.6 module no longer ships the kind.
	{"sigs.k8s.io/gateway-api-inference-extension", "v1.5.0", []string{
		"config/crd/bases/inference.networking.x-k8s.io_inferenceobjectives.yaml"}},
	{"github.com/prometheus-operator/prometheus-operator", "v0.85.0", []string{
		"example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
		"example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml",
		"example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"}},
	{"github.com/cloudnative-pg/cloudnative-pg", "v1.28.0", []string{
		"config/crd/bases/postgresql.cnpg.io_clusters.yaml", "config/crd/bases/postgresql.cnpg.io_scheduledbackups.yaml",
		"config/crd/bases/postgresql.cnpg.io_backups.yaml", "config/crd/bases/postgresql.cnpg.io_databases.yaml"}},
	// CloudNativePG's backups and WAL archive go through the Barman Cloud plugin (the in-tree
	// barmanObjectStore is deprecated since 1.26); its ObjectStore says where.
	{"github.com/cloudnative-pg/plugin-barman-cloud", "v0.15.0", []string{"config/crd/bases/barmancloud.cnpg.io_objectstores.yaml"}},
	// The kinds the platform renders, not their issuers and stores (cluster-specific, not in Git).
	// cert-manager's deploy/crds are the controller-gen output its Helm chart's CRDs are made from.
	{"github.com/cert-manager/cert-manager", "v1.21.2", []string{"deploy/crds/cert-manager.io_certificates.yaml"}},
	{"github.com/external-secrets/external-secrets", "v1.3.2", []string{"config/crds/bases/external-secrets.io_externalsecrets.yaml"}},
}

// Toolchain is the Go toolchain the project builds with (see the Makefile).
const Toolchain = "go1.27.3"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ModuleDir returns the directory of module@version in the module cache, downloading it through
// the Go module proxy when absent.
func ModuleDir(ctx context.Context, module, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = os.TempDir() // outside any module: the download must not touch the project's go.sum
	// argo-cd/v3's go.mod asks for Go 1.27: a machine whose default is older ("local") must still
	// be able to fetch it, e.g. when `auditor simulate` runs outside make.
	cmd.Env = os.Environ()
	if tc := os.Getenv("GOTOOLCHAIN"); tc == "" || tc == "local" {
		cmd.Env = append(cmd.Env, "GOTOOLCHAIN="+Toolchain)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr == nil && info.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, info.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w: %s", module, version, err, stderr.String())
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: no directory reported", module, version)
	}
	return info.Dir, nil
}

// LoadUpstreamCRDs reads every CRD of UpstreamCRDs.
func LoadUpstreamCRDs(ctx context.Context) ([]*unstructured.Unstructured, error) {
	var crds []*unstructured.Unstructured
	for _, src := range UpstreamCRDs {
		dir, err := ModuleDir(ctx, src.Module, src.Version)
		if err != nil {
			return nil, err
		}
		for _, f := range src.Files {
			objs, err := readYAMLObjects(filepath.Join(dir, f))
			if err != nil {
				return nil, fmt.Errorf("%s@%s: %w", src.Module, src.Version, err)
			}
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" {
					crds = append(crds, o)
				}
			}
		}
	}
	return crds, nil
}

// InstallUpstreamCRDs server-side applies the upstream CRDs and waits until each is established.
func InstallUpstreamCRDs(ctx context.Context, cfg *rest.Config, log io.Writer) error {
	crds, err := LoadUpstreamCRDs(ctx)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	if log != nil {
		fmt.Fprintf(log, "installing %d upstream CRDs (Argo CD, KEDA, Karpenter and its AWS provider, Gateway API and its inference extension, Prometheus Operator, CloudNativePG and its Barman Cloud plugin, cert-manager, External Secrets)\n", len(crds))
	}
	force := true
	for _, crd := range crds {
		data, err := json.Marshal(crd.Object)
		if err != nil {
			return fmt.Errorf("install CRD %s: %w", crd.GetName(), err)
		}
		_, err = dc.Resource(crdGVR).Patch(ctx, crd.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: "testcluster", Force: &force})
		if err != nil {
			return fmt.Errorf("install CRD %s: %w", crd.GetName(), err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, crd := range crds {
		for {
			got, err := dc.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err == nil && established(got) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not established after 60s (last error: %v)", crd.GetName(), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// readYAMLObjects decodes every non-empty document of a multi-document YAML file.
func readYAMLObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	objs, err := manifest.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}
