package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// KwokAnnotation marks the Node objects kwok manages: it keeps them Ready and moves the Pods
// scheduled to them through Running (and Jobs' Pods to Succeeded), as kubelets would.
const KwokAnnotation = "kwok.x-k8s.io/node"

// kwokStages are the Stage files of kwok's module the cluster runs with: nodes become Ready and
// keep a heartbeat; pods become Ready, Jobs' pods complete, deleted pods go; a claim gets a
// volume made for it (kube-controller-manager binds the two).
var kwokStages = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/node/heartbeat/node-heartbeat.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-complete.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
	"kustomize/stage/volume/fast/pvc-provision.yaml",
	"kustomize/stage/volume/fast/pv-delete.yaml",
}

// provisionOnly keeps the first step of kwok's pvc-provision stage — create a volume for the claim,
// as a CSI provisioner would — and drops the steps that bind the claim, so the binding is done,
// and its fields written, by kube-controller-manager's PV controller as in a real cluster.
func provisionOnly(text string) (string, error) {
	var stage map[string]any
	if err := yaml.Unmarshal([]byte(text), &stage); err != nil {
		return "", err
	}
	steps, ok, _ := unstructured.NestedSlice(stage, "spec", "steps")
	if !ok || len(steps) == 0 {
		return "", fmt.Errorf("no steps")
	}
	if err := unstructured.SetNestedSlice(stage, steps[:1], "spec", "steps"); err != nil {
		return "", err
	}
	out, err := yaml.Marshal(stage)
	return string(out), err
}

// kwokStorageClassSelector is how kwok's volume stages pick the claims they provision. The test
// cluster provisions a claim of any class: the platform names classes (model-cache, gp3) that
// belong to a cloud's CSI drivers, and their claims must still bind here.
const kwokStorageClassSelector = "self.spec.storageClassName == 'kwok-volume'"

func (c *Cluster) startKwok(ctx context.Context, port int) error {
	if err := need("kwok", c.bins.Kwok); err != nil {
		return err
	}
	dir, err := ModuleDir(ctx, "sigs.k8s.io/kwok", KwokVersion)
	if err != nil {
		return err
	}
	var docs []string
	for _, f := range append(kwokStages, "kustomize/stage/volume/fast/storage-class.yaml") {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return fmt.Errorf("kwok stages: %w", err)
		}
		text := strings.ReplaceAll(string(data), kwokStorageClassSelector, "has(self.spec.storageClassName)")
		if strings.HasSuffix(f, "/pvc-provision.yaml") {
			if text, err = provisionOnly(text); err != nil {
				return fmt.Errorf("kwok stage %s: %w", f, err)
			}
		}
		docs = append(docs, text)
	}
	// The StorageClass is applied to the cluster; the stages are kwok's configuration.
	class, stages := docs[len(docs)-1], docs[:len(docs)-1]
	config := filepath.Join(c.Dir, "kwok.yaml")
	if err := os.WriteFile(config, []byte(strings.Join(stages, "\n---\n")), 0o644); err != nil {
		return fmt.Errorf("write kwok config: %w", err)
	}
	c.logf("starting kwok %s (nodes annotated %s=fake run their pods)", KwokVersion, KwokAnnotation)
	p, err := startProcess(c.Dir, "kwok", c.bins.Kwok, []string{
		"--kubeconfig=" + c.Kubeconfig, "--config=" + config,
		"--manage-nodes-with-annotation-selector=" + KwokAnnotation + "=fake",
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
		"--cidr=10.244.0.0/16", "--node-ip=127.0.0.1",
	}, nil, c.opts.Detach)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	if err := waitHTTP(ctx, p, "http://127.0.0.1:"+strconv.Itoa(port)+"/healthz", nil, 60*time.Second); err != nil {
		return err
	}
	return c.applyYAML(ctx, class, "kwok")
}

// AddNodes creates nodes for kwok to run (each gets the kwok annotation) and waits until every one
// is Ready. Nodes that already exist are left as they are.
func (c *Cluster) AddNodes(ctx context.Context, nodes []*corev1.Node) error {
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	for _, n := range nodes {
		n = n.DeepCopy()
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[KwokAnnotation] = "fake"
		n.Status.Conditions = nil // kwok reports them
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range nodes {
			got, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil || !nodeReady(got) {
				return false, nil
			}
		}
		return true, nil
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
